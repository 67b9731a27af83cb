package health

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestProbeReadiness(t *testing.T) {
	var p Probe
	step := func(want bool, reason string) {
		t.Helper()
		got, why := p.Ready(t.Context())
		if got != want || !strings.Contains(why, reason) {
			t.Fatalf("Ready() = %v %q, want %v containing %q", got, why, want, reason)
		}
	}
	step(false, "starting")
	p.Started()
	step(false, "not a member")
	tok := p.PollBegins() // a poll begun before any assignment counts for nothing
	p.Assigned(map[string][]int32{"d": {0, 1, 2}})
	p.PollEnded(tok)
	step(false, "first poll")
	tok = p.PollBegins()
	p.PollEnded(tok)
	step(true, "3 partition(s)")

	// A rebalance: the poll in flight during it does not count.
	tok = p.PollBegins()
	p.Revoked(map[string][]int32{"d": {0, 2}})
	p.Assigned(nil)
	p.PollEnded(tok)
	step(false, "first poll")
	p.PollEnded(p.PollBegins())
	step(true, "1 partition(s)")
	p.Revoked(map[string][]int32{"d": {1}})
	p.Assigned(nil)
	p.PollEnded(p.PollBegins())
	step(true, "0 partition(s)")

	p.Lost()
	step(false, "not a member")
	p.PollEnded(p.PollBegins())
	step(false, "not a member")
	p.Assigned(map[string][]int32{"d": {4, 5}})
	p.PollEnded(p.PollBegins())
	step(true, "2 partition(s)")

	p.Draining()
	step(false, "draining")
	if ok, _ := p.Live(); !ok {
		t.Fatal("a draining service is still live")
	}
	p.Failed(errors.New("kafka gone"))
	if ok, why := p.Live(); ok || !strings.Contains(why, "kafka gone") {
		t.Fatalf("Live() after Failed = %v %q", ok, why)
	}
}

func TestServe(t *testing.T) {
	var p Probe
	s, err := Serve("127.0.0.1:0", &p)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + s.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 || body != "alive\n" {
		t.Fatalf("/healthz = %d %q", code, body)
	}
	if code, body := get("/readyz"); code != 503 || !strings.HasPrefix(body, "starting") {
		t.Fatalf("/readyz before start = %d %q", code, body)
	}
	p.Started()
	p.Assigned(map[string][]int32{"d": {0}})
	p.PollEnded(p.PollBegins())
	if code, body := get("/readyz"); code != 200 || !strings.HasPrefix(body, "ready") {
		t.Fatalf("/readyz when ready = %d %q", code, body)
	}
	if code, _ := get("/nope"); code != 404 {
		t.Fatalf("/nope = %d", code)
	}
	if _, err := Serve(s.Addr(), &p); err == nil || !strings.Contains(err.Error(), "--health-addr") {
		t.Fatalf("second Serve on a taken address: %v", err)
	}
}
