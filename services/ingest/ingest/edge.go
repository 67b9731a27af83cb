package ingest

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/hookline/hookline/platform/connmux"
	"github.com/hookline/hookline/platform/filewatch"
	"github.com/hookline/hookline/platform/tlsconf"
	"github.com/hookline/hookline/services/ingest/apikey"
)

// edge is ingest's port before the handlers: it secures the gRPC
// listener (TLS, for every protocol on the port) and authenticates each
// caller on its headers, before a body or a message is read (invariant
// I36: tapAuth, authHTTP, preauth.go). It holds the API keys, the
// listener's TLS configuration, the budget of connections that have not
// authenticated, and for the HTTP body deadline the clock and
// --http-body-timeout; nothing else.
type edge struct {
	keys *apikey.Keys
	tls  *tls.Config // nil: plaintext
	// preauth bounds what connections that have not authenticated hold.
	preauth *preauth
	log     *slog.Logger
	// now is the clock bodyDeadline reads.
	now func() time.Time
	// bodyTimeout is --http-body-timeout.
	bodyTimeout time.Duration
}

// newEdge loads the API keys and the TLS configuration of the gRPC
// listener. Both are re-read when their files change (at the pace of
// clock); a change that does not load is logged and the previous
// version kept. now is the clock of the HTTP body deadline.
func newEdge(cfg Config, log *slog.Logger, clock, now func() time.Time) (*edge, error) {
	e := &edge{preauth: newPreauth(cfg.MaxUnauthenticatedBytes), log: log, now: now, bodyTimeout: cfg.HTTPBodyTimeout}
	minBits := apikey.MinBits
	if cfg.DevMode {
		minBits = 0
	}
	keys, err := apikey.Load(cfg.APIKeys, cfg.APIKeysFile, minBits, filewatch.WithClock(clock), filewatch.WithReport(func(err error) {
		if err != nil {
			log.Error("API keys file not reloaded; the previous keys stay in force", "file", cfg.APIKeysFile, "err", err)
			return
		}
		log.Info("API keys file reloaded", "file", cfg.APIKeysFile)
	}))
	if err != nil {
		return nil, err
	}
	e.keys = keys

	switch {
	case cfg.GRPCTLSCert == "" && cfg.GRPCTLSKey == "" && cfg.GRPCClientCA == "":
		return e, nil
	case cfg.GRPCTLSCert == "" || cfg.GRPCTLSKey == "":
		return nil, errors.New("--grpc-tls-cert and --grpc-tls-key go together (and --grpc-client-ca needs both)")
	}
	e.tls, err = tlsconf.Server(cfg.GRPCTLSCert, cfg.GRPCTLSKey, cfg.GRPCClientCA, filewatch.WithClock(clock), filewatch.WithReport(func(err error) {
		if err != nil {
			log.Error("gRPC TLS files not reloaded; the previous certificate stays in force", "cert", cfg.GRPCTLSCert, "err", err)
			return
		}
		log.Info("gRPC TLS certificate reloaded", "cert", cfg.GRPCTLSCert)
	}))
	if err != nil {
		return nil, fmt.Errorf("--grpc-tls-cert: %w", err)
	}
	return e, nil
}

// secureListener wraps ln in TLS when TLS is configured. TLS sits at the
// listener, not in gRPC's credentials, so anything else served on the
// same port (an HTTP gateway) gets the same certificate and the same
// client certificate checks.
func (e *edge) secureListener(ln net.Listener) net.Listener {
	if e.tls == nil {
		if a, ok := ln.Addr().(*net.TCPAddr); ok && !a.IP.IsLoopback() {
			e.log.Warn("gRPC is served in plaintext on a non-loopback address: API keys cross the network in the clear; set --grpc-tls-cert and --grpc-tls-key", "addr", ln.Addr().String())
		}
		return ln
	}
	// ALPN gives h2 to gRPC clients and http/1.1 to HTTP clients that
	// offer it, so each reaches its side of the port (platform/connmux).
	return tls.NewListener(ln, connmux.ALPN(e.tls))
}
