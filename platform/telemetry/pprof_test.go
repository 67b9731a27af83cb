package telemetry

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestPprofIsServedOnLoopbackOnlyAndOffByDefault(t *testing.T) {
	env, err := Start(t.Context(), "hookline-test", Config{LogLevel: "warn"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if a := env.PprofAddr(); a != "" {
		t.Errorf("pprof on %s with no --pprof-addr, want off", a)
	}
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0"} {
		if _, err := Start(t.Context(), "hookline-test", Config{LogLevel: "warn", PprofAddr: addr}, io.Discard); err == nil {
			t.Errorf("--pprof-addr %s accepted, want loopback only", addr)
		}
	}

	env, err = Start(t.Context(), "hookline-test", Config{LogLevel: "warn", PprofAddr: "127.0.0.1:0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- env.Serve(ctx) }()
	resp, err := http.Get("http://" + env.PprofAddr() + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine profile") {
		t.Errorf("GET goroutine profile: %s\n%s", resp.Status, body)
	}
	cancel()
	if err := <-served; err != nil {
		t.Errorf("Serve after cancel: %v", err)
	}
}
