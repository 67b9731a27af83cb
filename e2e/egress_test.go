package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
)

// envSmokescreen names the smokescreen binary (github.com/stripe/
// smokescreen; make test-unit installs it into bin/tools).
const envSmokescreen = "HOOKLINE_SMOKESCREEN"

// lockedBuffer is a bytes.Buffer safe for a writer process and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// startSmokescreen runs smokescreen on a free loopback port, allowed to
// reach loopback, and returns its address and its log.
func startSmokescreen(t *testing.T) (string, *lockedBuffer) {
	t.Helper()
	bin := os.Getenv(envSmokescreen)
	if bin == "" {
		t.Skipf("%s is not set (make test-unit installs smokescreen and sets it)", envSmokescreen)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	port := addr[strings.LastIndex(addr, ":")+1:]
	logs := &lockedBuffer{}
	cmd := exec.Command(bin, "--listen-ip", "127.0.0.1", "--listen-port", port, "--allow-range", "127.0.0.0/8", "--statsd-address", "127.0.0.1:9")
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// Until it accepts connections (a condition, bounded).
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err == nil {
			_ = c.Close()
			return addr, logs
		}
		if ctx.Err() != nil {
			t.Fatalf("smokescreen never listened on %s: %v\n%s", addr, err, logs.String())
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestDeliveriesGoThroughSmokescreenAndItCannotReachWhatTheGuardRefuses:
// with --egress-proxy pointing at smokescreen, a delivery to an allowed
// receiver goes through it (smokescreen logs the CONNECT to the checked
// IP); an endpoint whose name resolves to an address the dispatcher's
// guard refuses (localhost, outside --allow-cidrs) gets no request and
// fails as unresolvable, as without a proxy.
func TestDeliveriesGoThroughSmokescreenAndItCannotReachWhatTheGuardRefuses(t *testing.T) {
	proxy, logs := startSmokescreen(t)
	st := startStack(t, func(c *stackConfig) {
		c.dispatcher.EgressProxy = "http://" + proxy
		c.dispatcher.AllowPrivate = false
		c.dispatcher.AllowCIDRs = []string{"127.0.0.2/32"}
	})
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	rx := &receiver{}
	rx.code.Store(http.StatusOK)
	rx.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rx.mu.Lock()
		rx.posts = append(rx.posts, post{header: r.Header.Clone()})
		rx.mu.Unlock()
	}))
	rx.Listener = ln
	rx.Start()
	t.Cleanup(rx.Close)
	good := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL + "/hooks", EventTypes: []string{"egress.good"}})
	st.publish("egress.good", `{"n":1}`)
	st.deliveredOf(good.GetEndpoint().GetId(), 1)
	target := strings.TrimPrefix(rx.URL, "http://")
	if !strings.Contains(logs.String(), target) {
		t.Fatalf("smokescreen did not log a CONNECT to %s:\n%s", target, logs.String())
	}

	refused := newReceiver(t, http.StatusOK) // on 127.0.0.1, outside --allow-cidrs
	port := refused.URL[strings.LastIndex(refused.URL, ":")+1:]
	bad := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: fmt.Sprintf("http://localhost:%s/hooks", port), EventTypes: []string{"egress.bad"},
		RetryPolicy: ladderPolicy(2, time.Hour)})
	st.publish("egress.bad", `{"n":1}`)
	res := st.resultsOf(bad.GetEndpoint().GetId(), 1)[0]
	if res.GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED || !strings.Contains(res.GetError(), "cannot resolve") {
		t.Fatalf("an endpoint resolving to a refused address through the proxy: %v; want it failed as unresolvable", res)
	}
	if len(refused.got()) != 0 || strings.Contains(logs.String(), "127.0.0.1:"+port) {
		t.Fatalf("the refused receiver was reached (%d requests) or smokescreen was asked for it:\n%s", len(refused.got()), logs.String())
	}
}
