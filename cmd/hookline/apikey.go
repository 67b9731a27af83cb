package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/hookline/hookline/services/ingest/apikey"
)

type apikeyFlags struct {
	Tenant string `flag:"tenant" usage:"tenant the key belongs to (required)"`
}

// runAPIKey is "hookline apikey new --tenant T": it makes a key and
// prints it once, with the hashed --api-keys entry that admits it.
// Revoking a key is removing its entry from the configuration.
func runAPIKey(args []string, out io.Writer, getenv func(string) string) error {
	if len(args) == 0 || args[0] != "new" {
		return errors.New("usage: hookline apikey new --tenant T")
	}
	var f apikeyFlags
	if _, err := parse("apikey new", &f, args[1:], out, getenv); err != nil {
		return err
	}
	if f.Tenant == "" {
		return errors.New("--tenant is required")
	}
	key, entry, err := apikey.New(f.Tenant)
	if err != nil {
		return fmt.Errorf("--tenant: %w", err)
	}
	_, err = fmt.Fprintf(out, "key:   %s\n       (give it to the tenant; it is not stored anywhere)\nentry: %s\n       (add it to ingest's --api-keys / HOOKLINE_API_KEYS, comma-separated; remove it to revoke the key)\n", key, entry)
	return err
}
