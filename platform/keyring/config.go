package keyring

import (
	"errors"
	"fmt"
)

// Config is the key-file section of a service's configuration (ingest
// and dispatcher; `hookline secrets rekey`).
type Config struct {
	KeyFile           string `flag:"secrets-key-file" env:"HOOKLINE_SECRETS_KEY_FILE" usage:"file of key-encryption keys that seal endpoint signing secrets at rest, one \"<id> <base64 of 32 bytes>\" per line: the first seals, all open (make a line with: hookline secrets new-key)"`
	InsecurePlaintext bool   `flag:"insecure-plaintext-secrets" env:"HOOKLINE_INSECURE_PLAINTEXT_SECRETS" usage:"run without --secrets-key-file: new endpoint secrets are stored in the clear in the endpoints topic (development only)"`
}

// ErrNoKeyFile is returned by Config.Keyring when neither a key file nor
// plaintext mode is configured.
var ErrNoKeyFile = errors.New("endpoint signing secrets need a key to be sealed at rest: pass --secrets-key-file FILE (HOOKLINE_SECRETS_KEY_FILE), made with `hookline secrets new-key > FILE`, or accept secrets in the clear with --insecure-plaintext-secrets")

// Keyring returns the Keyring the configuration names: the key file's,
// or a plaintext one with InsecurePlaintext.
func (c Config) Keyring() (*Keyring, error) {
	switch {
	case c.KeyFile != "":
		k, err := Load(c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("--secrets-key-file: %w", err)
		}
		return k, nil
	case c.InsecurePlaintext:
		return Plaintext(), nil
	}
	return nil, ErrNoKeyFile
}
