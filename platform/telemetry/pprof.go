package telemetry

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	rpprof "runtime/pprof"
	"slices"
	"strings"
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
// own (never http.DefaultServeMux), without /debug/pprof/cmdline: the
// command line holds whatever secrets were passed as flags, and a
// profile never needs it (404, and the index does not list it). Safe for
// concurrent use.
func PprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/{$}", pprofIndex)
	// pprof.Index serves the runtime's named profiles; "cmdline" is not
	// one of them, so it is 404 there.
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// pprofIndex lists what PprofHandler serves (net/http/pprof's own index
// lists cmdline, which is not served).
func pprofIndex(w http.ResponseWriter, _ *http.Request) {
	// CPU profile, symbols and trace, then the runtime's profiles as text.
	links := []string{"profile", "symbol", "trace"}
	var names []string
	for _, p := range rpprof.Profiles() {
		names = append(names, p.Name())
	}
	slices.Sort(names)
	for _, n := range names {
		links = append(links, n+"?debug=1")
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	var b strings.Builder
	b.WriteString("<!DOCTYPE html><html><head><title>/debug/pprof/</title></head><body><p>Profiles (the command line is not served):</p><ul>\n")
	for _, l := range links {
		fmt.Fprintf(&b, "<li><a href=\"%s\">%s</a></li>\n", html.EscapeString(l), html.EscapeString(l))
	}
	b.WriteString("</ul></body></html>\n")
	_, _ = io.WriteString(w, b.String())
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
