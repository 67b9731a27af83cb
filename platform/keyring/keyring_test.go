package keyring

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/sdk/sign"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func mustParse(t *testing.T, lines ...string) *Keyring {
	t.Helper()
	k, err := Parse([]byte(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealedSecretsOpenAfterAKeyRotationAndResealUnderTheNewKey(t *testing.T) {
	oldLine, newLine := NewKeyLine(t0), NewKeyLine(t0.Add(time.Hour))
	before := mustParse(t, oldLine)
	secret := sign.GenerateSecret()
	es, err := before.Seal("acme", "ep_1", secret, t0)
	if err != nil {
		t.Fatal(err)
	}
	if es.GetSecret() != "" || strings.Contains(string(es.GetSealed().GetCiphertext()), secret) {
		t.Fatal("sealed record holds the secret in the clear")
	}
	// The new key goes first; the old one stays for reads.
	after := mustParse(t, "# rotated", newLine, "", oldLine)
	if got, err := after.Open("acme", "ep_1", es); err != nil || got != secret {
		t.Fatalf("after rotation: Open = %q, %v", got, err)
	}
	re, changed, err := after.Reseal("acme", "ep_1", es)
	if err != nil || !changed {
		t.Fatalf("Reseal = %v, %v", changed, err)
	}
	if re.GetSealed().GetKeyId() != after.Current() || after.Current() == before.Current() {
		t.Fatalf("resealed under %q, want the new key %q", re.GetSealed().GetKeyId(), after.Current())
	}
	if _, changed, _ := after.Reseal("acme", "ep_1", re); changed {
		t.Fatal("a secret under the current key was resealed again")
	}
	// With the old key gone, the resealed secret still opens.
	if got, err := mustParse(t, newLine).Open("acme", "ep_1", re); err != nil || got != secret {
		t.Fatalf("new key only: Open = %q, %v", got, err)
	}
}

func TestOpeningFailsClearly(t *testing.T) {
	k := mustParse(t, NewKeyLine(t0))
	es, _ := k.Seal("acme", "ep_1", sign.GenerateSecret(), t0)
	tests := []struct {
		name     string
		ring     *Keyring
		tenant   string
		endpoint string
		want     error
		says     string
	}{
		{"key id not in the file", mustParse(t, NewKeyLine(t0.Add(time.Hour))), "acme", "ep_1", ErrUnknownKey, "add that key back"},
		{"another key under the same id", mustParse(t, es.GetSealed().GetKeyId()+" "+strings.Fields(NewKeyLine(t0))[1]), "acme", "ep_1", ErrNotOpened, "not the one that sealed it"},
		{"moved to another endpoint", k, "acme", "ep_2", ErrNotOpened, "copied from another endpoint"},
		{"moved to another tenant", k, "evil", "ep_1", ErrNotOpened, "copied from another endpoint"},
		{"plaintext mode", Plaintext(), "acme", "ep_1", ErrUnknownKey, "--secrets-key-file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.ring.Open(tt.tenant, tt.endpoint, es)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("got %v, want %v saying %q", err, tt.want, tt.says)
			}
		})
	}
}

func TestPlaintextModeAndLegacyRecords(t *testing.T) {
	secret := sign.GenerateSecret()
	es, _ := Plaintext().Seal("acme", "ep_1", secret, t0)
	if es.GetSecret() != secret || es.GetSealed() != nil {
		t.Fatalf("plaintext mode sealed: %v", es)
	}
	k := mustParse(t, NewKeyLine(t0))
	if got, err := k.Open("acme", "ep_1", es); err != nil || got != secret {
		t.Fatalf("a record in the clear: Open = %q, %v", got, err)
	}
	re, changed, err := k.Reseal("acme", "ep_1", es)
	if err != nil || !changed || re.GetSecret() != "" {
		t.Fatalf("Reseal of a record in the clear = %v, %v, %v", re, changed, err)
	}
}

func TestEd25519KeysKeepTheirPublicKeyInTheClear(t *testing.T) {
	priv, pub := sign.GenerateKeyPair()
	es, err := mustParse(t, NewKeyLine(t0)).Seal("acme", "ep_1", priv, t0)
	if err != nil || es.GetPublicKey() != pub || es.GetSecret() != "" {
		t.Fatalf("Seal(ed25519) = %v, %v", es, err)
	}
}

func TestParseRefusesBadKeyFiles(t *testing.T) {
	good := NewKeyLine(t0)
	id := strings.Fields(good)[0]
	tests := []struct{ name, give, says string }{
		{"empty", "# nothing\n", "holds no key"},
		{"short key", "k1 " + "AAAA", "base64 of 32"},
		{"three fields", good + " extra", "want"},
		{"bad id", "k/1 " + strings.Fields(good)[1], "key id"},
		{"duplicate id", good + "\n" + id + " " + strings.Fields(NewKeyLine(t0))[1], "twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Parse([]byte(tt.give)); err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("got %v, want an error saying %q", err, tt.says)
			}
		})
	}
}

func TestConfigRefusesToRunWithoutAKey(t *testing.T) {
	if _, err := (Config{}).Keyring(); !errors.Is(err, ErrNoKeyFile) || !strings.Contains(err.Error(), "--insecure-plaintext-secrets") {
		t.Fatalf("no key file: %v", err)
	}
	if k, err := (Config{InsecurePlaintext: true}).Keyring(); err != nil || k.Current() != "" {
		t.Fatalf("plaintext: %v, %v", k, err)
	}
	path := filepath.Join(t.TempDir(), "keys")
	if made, err := CreateFile(path, t0); err != nil || !made {
		t.Fatalf("CreateFile = %v, %v", made, err)
	}
	if made, err := CreateFile(path, t0.Add(time.Hour)); err != nil || made {
		t.Fatalf("CreateFile of an existing file = %v, %v; want it kept", made, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	k, err := (Config{KeyFile: path, InsecurePlaintext: true}).Keyring()
	if err != nil || k.Current() == "" {
		t.Fatalf("key file: %v, %v", k, err)
	}
}
