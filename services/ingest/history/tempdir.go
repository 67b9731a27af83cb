package history

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// tempPrefix starts the name of a temporary index directory (no
// --data-dir): tempPrefix, the owner's pid, "-", a random suffix.
const tempPrefix = "hookline-history-"

// makeTempDir makes a temporary index directory in parent (os.TempDir if
// empty), named for this process, after removing those left by processes
// no longer alive (killed before Close could remove them).
func makeTempDir(parent string) (string, error) {
	if parent == "" {
		parent = os.TempDir()
	}
	removeStale(parent)
	return os.MkdirTemp(parent, tempPrefix+strconv.Itoa(os.Getpid())+"-")
}

// removeStale removes the temporary index directories in parent whose
// owner is not alive, and returns them. A directory whose name does not
// carry a pid (made by an older version) is left alone: its owner cannot
// be told.
func removeStale(parent string) []string {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), tempPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 || alive(pid) {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		if os.RemoveAll(dir) == nil {
			removed = append(removed, dir)
		}
	}
	return removed
}

// alive reports whether a process with pid exists (signal 0 checks
// without sending anything; EPERM means it exists under another user).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// errTemp wraps a failure to make the temporary directory.
func errTemp(err error) error { return fmt.Errorf("history: temporary index directory: %w", err) }
