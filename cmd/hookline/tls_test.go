package main

import (
	"bytes"
	"maps"
	"strings"
	"testing"

	"github.com/hookline/hookline/platform/tlsconf"
	"github.com/hookline/hookline/platform/tlsconf/tlstest"
	"google.golang.org/grpc/credentials"
)

// hookline dev serving mutual TLS (--grpc-tls-cert, --grpc-tls-key,
// --grpc-client-ca): the CLI reaches it with --ca, --cert and --key (or
// their HOOKLINE_TLS_* variables); without TLS, without a client
// certificate, or with one from another CA it does not.
func TestCLIReachesIngestOverMutualTLSOnly(t *testing.T) {
	m := tlstest.NewMutualTLS(t, t.TempDir())
	srv, cli, foreign := m.Server, m.Client, m.Foreign

	dev := startDev(t, t.TempDir(), "--grpc-tls-cert", srv.Cert, "--grpc-tls-key", srv.Key, "--grpc-client-ca", srv.CA)
	tc, err := tlsconf.Client(cli.CA, cli.Cert, cli.Key)
	if err != nil {
		t.Fatal(err)
	}
	waitServing(t, dev.grpc, credentials.NewTLS(tc))

	tlsEnv := map[string]string{}
	list := func(args ...string) error {
		env := map[string]string{"HOOKLINE_ADDR": dev.grpc, "HOOKLINE_API_KEY": dev.apiKey, "HOOKLINE_TIMEOUT": "10s"}
		maps.Copy(env, tlsEnv)
		var out bytes.Buffer
		return run(t.Context(), append([]string{"endpoint", "list"}, args...), &out, func(k string) string { return env[k] })
	}
	if err := list("--ca", cli.CA, "--cert", cli.Cert, "--key", cli.Key); err != nil {
		t.Fatalf("mutual TLS with --ca, --cert, --key: %v", err)
	}
	tlsEnv = map[string]string{"HOOKLINE_TLS_CA": cli.CA, "HOOKLINE_TLS_CERT": cli.Cert, "HOOKLINE_TLS_KEY": cli.Key}
	if err := list(); err != nil {
		t.Fatalf("mutual TLS with HOOKLINE_TLS_CA, _CERT, _KEY: %v", err)
	}
	tlsEnv = nil
	for name, args := range map[string][]string{
		"plaintext":                        nil,
		"TLS without a client cert":        {"--ca", cli.CA},
		"a client cert from another CA":    {"--ca", cli.CA, "--cert", foreign.Cert, "--key", foreign.Key},
		"TLS not trusting the server's CA": {"--tls", "--cert", cli.Cert, "--key", cli.Key},
	} {
		if err := list(args...); err == nil || !strings.Contains(err.Error(), "Unavailable") {
			t.Errorf("%s: %v; want refused (Unavailable)", name, err)
		}
	}
	if err := list("--cert", cli.Cert); err == nil || !strings.Contains(err.Error(), "--key") {
		t.Errorf("--cert without --key: %v", err)
	}
}
