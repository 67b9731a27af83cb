package ingest

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"testing"

	"github.com/hookline/hookline/platform/tlsconf/tlstest"
)

// TestConsoleOverTLSRequiresTheClientCertificateGRPCDoes is issue 25
// F7: with --grpc-client-ca the API refuses a caller without a client
// certificate from that CA, but the console's TLS listener never asked
// for one, so a stolen key signed in from anywhere. The console now asks
// for the same certificate: without one, or with one another CA signed,
// the handshake fails; with one, the sign-in page is served.
func TestConsoleOverTLSRequiresTheClientCertificateGRPCDoes(t *testing.T) {
	m := tlstest.NewMutualTLS(t, t.TempDir())
	r := newHistoryRig(t)
	r.configure = func(c *Config) {
		c.GRPCTLSCert, c.GRPCTLSKey, c.GRPCClientCA = m.Server.Cert, m.Server.Key, m.Server.CA
		c.ConsoleTLSCert, c.ConsoleTLSKey = m.Server.Cert, m.Server.Key
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.startTLS(m.Client, WithConsoleListener(ln))
	caPEM, err := os.ReadFile(m.Server.CA)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	get := func(cert *tls.Certificate) (*http.Response, error) {
		conf := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if cert != nil {
			conf.Certificates = []tls.Certificate{*cert}
		}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: conf}}
		defer c.CloseIdleConnections()
		return c.Get("https://" + ln.Addr().String() + "/login")
	}
	load := func(f tlstest.Files) *tls.Certificate {
		c, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		return &c
	}
	if resp, err := get(nil); err == nil {
		resp.Body.Close()
		t.Fatalf("the console served %s to a client without a certificate", resp.Status)
	}
	if resp, err := get(load(m.Foreign)); err == nil {
		resp.Body.Close()
		t.Fatalf("the console served %s to a client whose certificate another CA signed", resp.Status)
	}
	resp, err := get(load(m.Client))
	if err != nil {
		t.Fatalf("with a client certificate from the CA: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("with a client certificate from the CA: %s", resp.Status)
	}
}
