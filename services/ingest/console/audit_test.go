package console

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range bytes.Split(s.b.Bytes(), []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(l, &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// TestConsoleAuditLogsSignInsAndActions: every sign-in (refused or not),
// action and sign-out is a structured log line ("console audit") naming
// the event, the tenant, the session and the client, never the key.
func TestConsoleAuditLogsSignInsAndActions(t *testing.T) {
	var logs syncBuffer
	be := &fakeBackend{}
	srv := httptest.NewServer(New(be, WithLogger(slog.New(slog.NewJSONHandler(&logs, nil)))).Handler())
	defer srv.Close()
	signIn(t, srv, "wrong-key")
	c, page := signIn(t, srv, "admin-key")
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no CSRF token")
	}
	for _, path := range []string{"/deliveries/dlv_1/resend", "/logout"} {
		resp, err := c.PostForm(srv.URL+path, url.Values{"csrf": {m[1]}})
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	var events []string
	session := ""
	for _, l := range logs.lines() {
		if l["msg"] != "console audit" {
			continue
		}
		events = append(events, l["event"].(string))
		if l["remote"] == nil || strings.Contains(toString(l), "admin-key") {
			t.Fatalf("audit line without the client, or with the key: %v", l)
		}
		if l["event"] != "sign_in_refused" {
			if l["tenant"] != "acme" || l["session"] == nil || l["session"] == "" {
				t.Fatalf("audit line without tenant or session: %v", l)
			}
			if session == "" {
				session = l["session"].(string)
			} else if l["session"] != session {
				t.Fatalf("one session logged under two ids: %v", l)
			}
		}
	}
	want := []string{"sign_in_refused", "sign_in", "resend", "sign_out"}
	if strings.Join(events, ",") != strings.Join(want, ",") {
		t.Fatalf("audit events %v, want %v", events, want)
	}
}

func toString(m map[string]any) string {
	b, _ := json.Marshal(m)
	return string(b)
}

// TestConsoleSignInIsThrottled: a client that keeps trying keys is
// answered 429 with a Retry-After once past its burst of attempts,
// before its key is even looked at (so a right key does not tell a
// guesser it was right); the clock moving on lets it try again.
func TestConsoleSignInIsThrottled(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	srv := httptest.NewServer(New(&fakeBackend{}, WithClock(clock)).Handler())
	defer srv.Close()
	post := func(key string) (int, http.Header) {
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).PostForm(srv.URL+"/login", url.Values{"api_key": {key}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	refused := 0
	for range 1000 {
		switch code, _ := post("wrong-key"); code {
		case http.StatusUnauthorized:
			if refused > 0 {
				t.Fatal("a wrong key was checked again after the throttle started")
			}
		case http.StatusTooManyRequests:
			refused++
		}
	}
	if refused < 980 {
		t.Fatalf("%d of 1000 wrong keys in one instant throttled, want all but the burst", refused)
	}
	code, h := post("admin-key")
	if code != http.StatusTooManyRequests || h.Get("Retry-After") == "" {
		t.Fatalf("the right key while throttled: %d (Retry-After %q), want 429 with a delay", code, h.Get("Retry-After"))
	}
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	if code, _ := post("admin-key"); code != http.StatusSeeOther {
		t.Fatalf("the right key an hour later: %d, want 303 into the console", code)
	}
}
