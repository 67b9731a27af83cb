package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// listenPprof listens on addr for the pprof endpoint. The endpoint shows
// stacks, heap contents and command lines, so it binds loopback hosts
// only (127.0.0.0/8, ::1, localhost); reach it from elsewhere through a
// tunnel (ssh -L, kubectl port-forward).
func listenPprof(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof-addr: %w", err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("--pprof-addr: the pprof endpoint listens on loopback only, got host %q", host)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof-addr: %w", err)
	}
	return ln, nil
}

// PprofHandler serves net/http/pprof under /debug/pprof/ on a mux of its
// own (never http.DefaultServeMux). Safe for concurrent use.
func PprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// serveHTTP serves h on ln until ctx ends, then shuts down within 5 s.
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler, what string) error {
	// No write timeout: /debug/pprof/profile?seconds=30 answers after 30 s.
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("telemetry: %s endpoint: %w", what, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		// A request still running (a 30 s CPU profile) does not fail the
		// shutdown: cut it.
		_ = srv.Close()
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("telemetry: %s endpoint: %w", what, err)
	}
	return nil
}
