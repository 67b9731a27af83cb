package ingest

import (
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
)

// TestConsoleSessionFromOneIngestIsServedByAnother: behind a load
// balancer the console's requests reach any replica; a session made by
// one ingest is a signed cookie that another with the same API keys (so
// the same derived key) serves, without signing in again.
func TestConsoleSessionFromOneIngestIsServedByAnother(t *testing.T) {
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
	r.dir = filepath.Join(t.TempDir(), "index-b") // a replica of its own
	r.start(WithConsoleListener(lnB))
	r.dir = dirA

	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.PostForm("http://"+lnA.Addr().String()+"/login", url.Values{"api_key": {historyTestKey}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/" {
		t.Fatalf("sign-in on ingest a: %v at %v", resp.Status, resp.Request.URL)
	}
	resp, err = c.Get("http://" + lnB.Addr().String() + "/deliveries")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/deliveries" || !strings.Contains(string(body), "acme") {
		t.Fatalf("ingest b with ingest a's session: %v at %v\n%s", resp.Status, resp.Request.URL, body)
	}
}
