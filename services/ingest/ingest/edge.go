package ingest

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"

	"github.com/hookline/hookline/platform/connmux"
	"github.com/hookline/hookline/platform/filewatch"
	"github.com/hookline/hookline/platform/tlsconf"
	"github.com/hookline/hookline/services/ingest/apikey"
)

// loadEdgeSecurity loads the API keys and the TLS configuration of the
// gRPC listener. Both are re-read when their files change; a change
// that does not load is logged and the previous version kept.
func (s *Service) loadEdgeSecurity() error {
	minBits := apikey.MinBits
	if s.cfg.DevMode {
		minBits = 0
	}
	keys, err := apikey.Load(s.cfg.APIKeys, s.cfg.APIKeysFile, minBits, filewatch.WithClock(s.now), filewatch.WithReport(func(err error) {
		if err != nil {
			s.log.Error("API keys file not reloaded; the previous keys stay in force", "file", s.cfg.APIKeysFile, "err", err)
			return
		}
		s.log.Info("API keys file reloaded", "file", s.cfg.APIKeysFile)
	}))
	if err != nil {
		return err
	}
	s.keys = keys

	switch {
	case s.cfg.GRPCTLSCert == "" && s.cfg.GRPCTLSKey == "" && s.cfg.GRPCClientCA == "":
		return nil
	case s.cfg.GRPCTLSCert == "" || s.cfg.GRPCTLSKey == "":
		return errors.New("--grpc-tls-cert and --grpc-tls-key go together (and --grpc-client-ca needs both)")
	}
	s.tls, err = tlsconf.Server(s.cfg.GRPCTLSCert, s.cfg.GRPCTLSKey, s.cfg.GRPCClientCA, filewatch.WithClock(s.now), filewatch.WithReport(func(err error) {
		if err != nil {
			s.log.Error("gRPC TLS files not reloaded; the previous certificate stays in force", "cert", s.cfg.GRPCTLSCert, "err", err)
			return
		}
		s.log.Info("gRPC TLS certificate reloaded", "cert", s.cfg.GRPCTLSCert)
	}))
	if err != nil {
		return fmt.Errorf("--grpc-tls-cert: %w", err)
	}
	return nil
}

// secureListener wraps ln in TLS when TLS is configured. TLS sits at the
// listener, not in gRPC's credentials, so anything else served on the
// same port (an HTTP gateway) gets the same certificate and the same
// client certificate checks.
func (s *Service) secureListener(ln net.Listener) net.Listener {
	if s.tls == nil {
		if a, ok := ln.Addr().(*net.TCPAddr); ok && !a.IP.IsLoopback() {
			s.log.Warn("gRPC is served in plaintext on a non-loopback address: API keys cross the network in the clear; set --grpc-tls-cert and --grpc-tls-key", "addr", ln.Addr().String())
		}
		return ln
	}
	// ALPN gives h2 to gRPC clients and http/1.1 to HTTP clients that
	// offer it, so each reaches its side of the port (platform/connmux).
	return tls.NewListener(ln, connmux.ALPN(s.tls))
}
