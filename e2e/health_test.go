package e2e

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/platform/health"
)

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// getHealth answers one GET of the health endpoint at addr+path.
func getHealth(addr, path string) (int, string, error) {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b)), err
}

// TestHealthEndpoints: the dispatcher and the scheduler, started with
// --health-addr, answer /healthz 200 at once, /readyz 503 until they hold
// their assignment and its first poll came back, then 200; on shutdown
// their readiness says draining.
func TestHealthEndpoints(t *testing.T) {
	daddr, saddr := freeAddr(t), freeAddr(t)
	st := startStack(t, func(c *stackConfig) {
		c.dispatcher.Health = health.Config{Addr: daddr}
		c.scheduler.Health = health.Config{Addr: saddr}
	})
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for _, addr := range []string{daddr, saddr} {
		deadline := time.Now().Add(waitFor)
		for {
			code, body, err := getHealth(addr, "/readyz")
			if err == nil && code == http.StatusOK {
				if !strings.HasPrefix(body, "ready: ") || !strings.Contains(body, "partition(s) assigned") {
					t.Fatalf("%s /readyz 200 with %q", addr, body)
				}
				break
			}
			if err == nil && code != http.StatusServiceUnavailable {
				t.Fatalf("%s /readyz answered %d %q", addr, code, body)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not ready within %v: %d %q %v", addr, waitFor, code, body, err)
			}
			<-tick.C
		}
		if code, body, err := getHealth(addr, "/healthz"); err != nil || code != http.StatusOK || body != "alive" {
			t.Fatalf("%s /healthz = %d %q %v", addr, code, body, err)
		}
	}
	// Stopped: the endpoint goes with the process once the drain ends.
	st.dispatcher.halt()
	st.scheduler.halt()
	for _, addr := range []string{daddr, saddr} {
		if _, _, err := getHealth(addr, "/healthz"); err == nil {
			t.Fatalf("%s still answers after the service returned", addr)
		}
	}
}
