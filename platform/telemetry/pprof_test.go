package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
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

// TestPprofDoesNotServeTheCommandLine: /debug/pprof/cmdline printed the
// process's arguments, and so every secret passed as a flag
// (--page-token-secret, --console-session-key, a dev --api-key). It is
// not served, and the index does not offer it.
func TestPprofDoesNotServeTheCommandLine(t *testing.T) {
	srv := httptest.NewServer(PprofHandler())
	defer srv.Close()
	for _, path := range []string{"/debug/pprof/cmdline", "/debug/pprof/cmdline?debug=1"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || strings.Contains(string(body), os.Args[0]) {
			t.Errorf("GET %s: %s, want 404 without the command line\n%s", path, resp.Status, body)
		}
	}
	resp, err := http.Get(srv.URL + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine") {
		t.Fatalf("index: %s\n%s", resp.Status, body)
	}
	if strings.Contains(string(body), "cmdline") {
		t.Errorf("the index still offers cmdline:\n%s", body)
	}
}
