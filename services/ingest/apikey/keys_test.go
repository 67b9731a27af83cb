package apikey

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/platform/filewatch"
)

// A key removed from the keys file stops resolving once the file is read
// again, and a key added starts; the fixed --api-keys entries stay.
func TestKeysFileRevocationTakesEffectWithoutARestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	fixedKey, fixedEntry, _ := New("acme", ScopeAdmin)
	k1, e1, _ := New("acme", ScopePublish)
	k2, e2, _ := New("beta", ScopeRead)
	write := func(lines ...string) {
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("# publishers", e1, "", e2)
	now := time.Unix(0, 0)
	var reports []error
	keys, err := Load([]string{fixedEntry}, path, MinBits, filewatch.WithClock(func() time.Time { return now }),
		filewatch.WithReport(func(err error) { reports = append(reports, err) }))
	if err != nil {
		t.Fatal(err)
	}
	resolves := func(key string) bool { _, ok := keys.Resolve(key); return ok }
	if !resolves(fixedKey) || !resolves(k1) || !resolves(k2) {
		t.Fatal("a configured key does not resolve")
	}

	write(e2) // revoke k1
	now = now.Add(filewatch.DefaultInterval)
	if resolves(k1) {
		t.Fatal("a revoked key still resolves after the file was read again")
	}
	if !resolves(k2) || !resolves(fixedKey) {
		t.Fatal("a key still configured stopped resolving")
	}

	// A reload with a weak key is rejected whole: k2 stays, the weak key
	// never resolves, the rejection is reported (and logged by ingest).
	write(e2, "beta:read:aaaaaaaaaaaaaaaaaaaaaaaa")
	now = now.Add(filewatch.DefaultInterval)
	if resolves("aaaaaaaaaaaaaaaaaaaaaaaa") || !resolves(k2) {
		t.Fatal("a reload with a weak key was not rejected whole")
	}
	if err := keys.Reload(); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("Reload: %v; want the weak key's line named", err)
	}
	if len(reports) != 2 || reports[0] != nil || reports[1] == nil {
		t.Fatalf("reports %v: want the reload, then the rejection", reports)
	}

	write() // every key of the file revoked: allowed at run time
	if err := keys.Reload(); err != nil || resolves(k2) || !resolves(fixedKey) {
		t.Fatalf("emptying the file: %v", err)
	}
}

func TestLoadRefusesAWeakKeyOrNoKeyAtStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte("acme:publish:0123456789abcdef01234567\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(nil, path, MinBits); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("a weak key in the file at start: %v", err)
	}
	if _, err := Load([]string{"acme:0123456789abcdef01234567"}, "", MinBits); err == nil {
		t.Fatal("a weak --api-keys entry at start was accepted")
	}
	if _, err := Load(nil, path, 0); err != nil {
		t.Fatalf("dev mode refused the key: %v", err)
	}
	if err := os.WriteFile(path, []byte("# none yet\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(nil, path, MinBits); err == nil {
		t.Fatal("no key at all was accepted at start")
	}
}
