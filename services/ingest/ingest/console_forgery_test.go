package ingest

import (
	"bytes"
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

	"github.com/hookline/hookline/platform/config"
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

// TestConsoleDoesNotStartWithoutASessionKey: the console on (an address
// or a listener) and no --console-session-key-file, or one with a short
// key, is refused at start with a message naming the flag and the
// variable; the console off needs none.
func TestConsoleDoesNotStartWithoutASessionKey(t *testing.T) {
	short := filepath.Join(t.TempDir(), "short.key")
	if err := os.WriteFile(short, []byte("too-short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		addr    string
		keyFile string
		want    string
	}{
		{"no key file", "127.0.0.1:0", "", "--console-session-key-file (HOOKLINE_CONSOLE_SESSION_KEY_FILE)"},
		{"a short key", "127.0.0.1:0", short, "at least 32 characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Defaults[Config]()
			if err != nil {
				t.Fatal(err)
			}
			cfg.APIKeys, cfg.Secrets.InsecurePlaintext = []string{"acme:" + acmeKey}, true
			cfg.ConsoleAddr, cfg.ConsoleSessionKeyFile = tt.addr, tt.keyFile
			if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want an error naming %q", err, tt.want)
			}
		})
	}
	cfg, _ := config.Defaults[Config]()
	cfg.APIKeys, cfg.Secrets.InsecurePlaintext = []string{"acme:" + acmeKey}, true
	if _, err := New(cfg); err != nil {
		t.Fatalf("no console, no key: %v", err)
	}
}

// TestConsoleCookieCarriesNoKeyHash: the session cookie of a real
// sign-in holds neither the API key nor its SHA-256 (the keys file's
// entry), in any encoding it could be read back from.
func TestConsoleCookieCarriesNoKeyHash(t *testing.T) {
	base, entry := consoleRig(t)
	resp, err := noRedirects.PostForm(base+"/login", url.Values{"api_key": {historyTestKey}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var value string
	for _, c := range resp.Cookies() {
		if c.Name == "hookline_console" {
			value = c.Value
		}
	}
	if resp.StatusCode != http.StatusSeeOther || value == "" {
		t.Fatalf("sign-in: %s, cookie %q", resp.Status, value)
	}
	sum, _ := hex.DecodeString(entry[strings.LastIndex(entry, ":")+1:])
	for part := range strings.SplitSeq(value, ".") {
		raw, _ := base64.RawURLEncoding.DecodeString(part)
		if bytes.Contains(raw, sum) || bytes.Contains(raw, []byte(historyTestKey)) || strings.Contains(value, hex.EncodeToString(sum)) {
			t.Fatalf("the cookie %q carries the key or its hash", value)
		}
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/", nil)
	req.AddCookie(&http.Cookie{Name: "hookline_console", Value: value})
	resp, err = noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET / with the session: %s", resp.Status)
	}
}
