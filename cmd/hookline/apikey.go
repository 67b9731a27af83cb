package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/hookline/hookline/services/ingest/apikey"
)

type apikeyFlags struct {
	Tenant string `flag:"tenant" usage:"tenant the key belongs to (required)"`
	Scope  string `flag:"scope" default:"admin" usage:"what the key may do: publish (PublishEvent only), read (read endpoints without their secrets, events and deliveries) or admin (everything)"`
}

// runAPIKey is "hookline apikey new --tenant T [--scope S]": it makes a
// key and prints it once, with the hashed entry that admits it. Revoking
// a key is removing its entry from ingest's keys file (re-read while
// ingest runs) or from --api-keys (read at start).
func runAPIKey(args []string, out io.Writer, getenv func(string) string) error {
	if len(args) == 0 || args[0] != "new" {
		return errors.New("usage: hookline apikey new --tenant T [--scope publish|read|admin]")
	}
	var f apikeyFlags
	if _, err := parse("apikey new", &f, args[1:], out, getenv); err != nil {
		return err
	}
	if f.Tenant == "" {
		return errors.New("--tenant is required")
	}
	scope, err := apikey.ParseScope(f.Scope)
	if err != nil {
		return fmt.Errorf("--scope: %w", err)
	}
	key, entry, err := apikey.New(f.Tenant, scope)
	if err != nil {
		return fmt.Errorf("--tenant: %w", err)
	}
	_, err = fmt.Fprintf(out, "key:   %s\n       (give it to the tenant; it is not stored anywhere)\nentry: %s\n       (scope %s; add it as a line of ingest's --api-keys-file, where removing it revokes the key without a restart, or to --api-keys / HOOKLINE_API_KEYS, comma-separated, read at start)\n", key, entry, scope)
	return err
}
