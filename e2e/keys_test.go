package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookline/hookline/platform/keyring"
)

// testKeyFile is the --secrets-key-file every service of the suite
// reads (made by TestMain): services of one test share endpoints, so
// they share the key that seals their secrets.
var testKeyFile string

func TestMain(m *testing.M) {
	os.Exit(runWithKeyFile(m))
}

func runWithKeyFile(m *testing.M) int {
	dir, err := os.MkdirTemp("", "hookline-e2e-keys")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	testKeyFile = filepath.Join(dir, "secrets.keys")
	if _, err := keyring.CreateFile(testKeyFile, time.Now()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
