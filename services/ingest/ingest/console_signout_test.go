package ingest

import (
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	consoleCSRF   = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)
	consoleBanner = regexp.MustCompile(`(?s)id="error">(.*?)</p>`)
)

// TestConsoleSignOutEndsTheSessionOnEveryReplica is issue 25 F11: signing
// out only cleared the browser's cookie, so a copy of it (a stolen one)
// stayed good until it expired. Now the session is revoked: its cookie,
// presented again after the sign-out, is refused by the replica that
// signed it out and by another.
func TestConsoleSignOutEndsTheSessionOnEveryReplica(t *testing.T) {
	r := newHistoryRig(t)
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return ln
	}
	lnA, lnB := listen(), listen()
	r.start(WithConsoleListener(lnA))
	dirA := r.dir
	r.dir = filepath.Join(t.TempDir(), "index-b")
	r.start(WithConsoleListener(lnB))
	r.dir = dirA
	a, b := "http://"+lnA.Addr().String(), "http://"+lnB.Addr().String()

	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.PostForm(a+"/login", url.Values{"api_key": {historyTestKey}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := consoleCSRF.FindSubmatch(page)
	u, _ := url.Parse(a)
	cookies := jar.Cookies(u)
	if m == nil || len(cookies) == 0 {
		t.Fatalf("sign-in on a: %s, no CSRF token or cookie", resp.Status)
	}
	stolen := cookies[0].Value
	get := func(base string) int {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/deliveries", nil)
		req.AddCookie(&http.Cookie{Name: "hookline_console", Value: stolen})
		resp, err := noRedirects.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get(b); got != http.StatusOK {
		t.Fatalf("the session on b before signing out: %d", got)
	}
	resp, err = c.PostForm(a+"/logout", url.Values{"csrf": {string(m[1])}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Request.URL.Path != "/login" {
		t.Fatalf("sign-out landed on %s", resp.Request.URL)
	}
	for name, base := range map[string]string{"a": a, "b": b} {
		if got := get(base); got != http.StatusSeeOther {
			t.Fatalf("the signed-out session's cookie on replica %s: %d, want 303 to sign in", name, got)
		}
	}
}

// TestConsoleErrorBannerShowsNoRequestText: the error banner echoed what
// the request said — a delivery id from the path ("delivery %q not
// found"), an unknown ?state=, a malformed time — so a link could put
// words of the sender's choosing in the console's own red banner. It
// shows none of them now.
func TestConsoleErrorBannerShowsNoRequestText(t *testing.T) {
	base, _ := consoleRig(t)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.PostForm(base+"/login", url.Values{"api_key": {historyTestKey}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	const words = "Your-account-is-locked-call-555-0100"
	for _, path := range []string{
		"/deliveries/" + words,
		"/deliveries/dlv_" + words,
		"/deliveries?state=" + words,
		"/deliveries?since=" + words,
		"/deliveries?endpoint=" + words,
		"/deliveries?type=" + words,
	} {
		resp, err := c.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if m := consoleBanner.FindSubmatch(body); m != nil && strings.Contains(string(m[1]), words) {
			t.Fatalf("GET %s: the error banner shows the request's text: %s", path, m[1])
		}
	}
}
