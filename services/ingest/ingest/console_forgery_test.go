package ingest

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/services/ingest/apikey"
)

// consoleRig starts one ingest whose only API key is a hashed entry in
// --api-keys-file (what the Helm chart deploys) with the console on, and
// returns the console's base URL and the hashed entry.
func consoleRig(t *testing.T) (base, entry string) {
	t.Helper()
	r := newHistoryRig(t)
	entry = apikey.HashedEntry("acme", apikey.ScopeAdmin, historyTestKey)
	keysFile := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keysFile, []byte(entry+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.configure = func(c *Config) { c.APIKeys, c.APIKeysFile = nil, keysFile }
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.start(WithConsoleListener(ln))
	return "http://" + ln.Addr().String(), entry
}

// noRedirects is a client that shows redirects instead of following them.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// TestConsoleRefusesASessionMintedFromAHashedKeyEntry is the attack of
// issue 25 F1: someone who can read a hashed keys-file entry (the keys
// file, a ConfigMap, a Helm value) but holds no key mints an admin
// session cookie the way the console did — HMAC-SHA256 under the key
// derived from a fixed string and --api-keys (empty with a keys file,
// so the same everywhere), over the expiry, the scope, the key's
// SHA-256, a nonce and the tenant. The console must refuse it: its
// session key is a secret the attacker does not have.
func TestConsoleRefusesASessionMintedFromAHashedKeyEntry(t *testing.T) {
	base, entry := consoleRig(t)
	hexSum := entry[strings.LastIndex(entry, ":")+1:]
	sum, err := hex.DecodeString(hexSum)
	if err != nil || len(sum) != sha256.Size {
		t.Fatalf("entry %q: %v", entry, err)
	}
	// What the attacker computes, from public source and the entry.
	derived := sha256.Sum256([]byte("hookline page tokens\x00" + strings.Join(nil, ",")))
	p := binary.BigEndian.AppendUint64(nil, uint64(time.Now().Add(time.Hour).Unix()))
	p = append(p, 1) // admin
	p = append(p, sum...)
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	p = append(append(p, nonce...), "acme"...)
	m := hmac.New(sha256.New, derived[:])
	m.Write([]byte("hookline console session\x00"))
	m.Write(p)
	forged := base64.RawURLEncoding.EncodeToString(p) + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))

	for _, path := range []string{"/", "/deliveries"} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+path, nil)
		req.AddCookie(&http.Cookie{Name: "hookline_console", Value: forged})
		resp, err := noRedirects.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
			t.Fatalf("GET %s with a cookie minted from the hashed entry: %s (Location %q), want 303 to /login", path, resp.Status, resp.Header.Get("Location"))
		}
	}
	// An action through it is refused before any handler.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/deliveries/dlv_x/resend", strings.NewReader(url.Values{"csrf": {"x"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: "hookline_console", Value: forged})
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("resend with the forged cookie: %s, want 401", resp.Status)
	}
}
