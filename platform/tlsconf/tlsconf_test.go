package tlsconf

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/hookline/hookline/platform/filewatch"
	"github.com/hookline/hookline/platform/tlsconf/tlstest"
)

// serve accepts TLS connections on a loopback listener until the test
// ends, completing each handshake, and returns the address.
func serve(t *testing.T, conf *tls.Config) string {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := tls.NewListener(raw, conf)
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				if c.(*tls.Conn).Handshake() == nil {
					_, _ = c.Write([]byte("ok"))
				}
			})
		}
	})
	return raw.Addr().String()
}

// handshake dials addr with conf and returns the server certificate's
// common name once the server has accepted the handshake.
func handshake(addr string, conf *tls.Config) (string, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, conf)
	if err != nil {
		return "", err
	}
	defer c.Close()
	// With TLS 1.3 the server checks the client certificate after the
	// client's handshake ends: its verdict arrives with the first read.
	b := make([]byte, 2)
	if _, err := c.Read(b); err != nil {
		return "", err
	}
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName, nil
}

func client(t *testing.T, f tlstest.Files, withCert bool) *tls.Config {
	t.Helper()
	cert, key := "", ""
	if withCert {
		cert, key = f.Cert, f.Key
	}
	c, err := Client(f.CA, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestServerRequiresAClientCertificateFromItsCA(t *testing.T) {
	m := tlstest.NewMutualTLS(t, t.TempDir())
	// The foreign client trusts the server's CA but holds a certificate
	// the server's client CA never signed.
	srv, good, foreign := m.Server, m.Client, m.Foreign

	conf, err := Server(srv.Cert, srv.Key, srv.CA)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, conf)

	if cn, err := handshake(addr, client(t, good, true)); err != nil || cn != "server-1" {
		t.Fatalf("client with a certificate from the client CA: %q, %v", cn, err)
	}
	if _, err := handshake(addr, client(t, foreign, true)); err == nil {
		t.Fatal("a client certificate from another CA was accepted")
	}
	if _, err := handshake(addr, client(t, good, false)); err == nil {
		t.Fatal("a client without a certificate was accepted")
	}
	if _, err := handshake(addr, &tls.Config{MinVersion: tls.VersionTLS12}); err == nil {
		t.Fatal("a client that does not trust the server's CA connected")
	}
	if _, err := handshake(addr, &tls.Config{MaxVersion: tls.VersionTLS11, InsecureSkipVerify: true}); err == nil { //nolint:gosec // the point: an old version is refused
		t.Fatal("TLS 1.1 was accepted")
	}
}

func TestServerServesARotatedCertificateAfterTheFilesChange(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "hookline test CA")
	srv := ca.WriteFiles(dir, "server", "server-1")
	now := time.Unix(1_700_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func() { mu.Lock(); now = now.Add(filewatch.DefaultInterval); mu.Unlock() }
	var reports []error
	conf, err := Server(srv.Cert, srv.Key, "", filewatch.WithClock(clock), filewatch.WithReport(func(err error) {
		mu.Lock()
		reports = append(reports, err)
		mu.Unlock()
	}))
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, conf)
	trust := client(t, srv, false)
	if cn, err := handshake(addr, trust); err != nil || cn != "server-1" {
		t.Fatalf("before rotation: %q, %v", cn, err)
	}

	// Half a rotation: the new certificate with the old key does not load;
	// the old pair keeps being served and the rejection is reported.
	cert2, key2 := ca.Issue("server-2")
	if err := os.WriteFile(srv.Cert, cert2, 0o600); err != nil {
		t.Fatal(err)
	}
	advance()
	if cn, err := handshake(addr, trust); err != nil || cn != "server-1" {
		t.Fatalf("with a mismatched pair on disk: %q, %v; want the old certificate", cn, err)
	}
	mu.Lock()
	if len(reports) != 1 || reports[0] == nil {
		t.Errorf("reports after a bad change: %v; want one error", reports)
	}
	mu.Unlock()

	if err := os.WriteFile(srv.Key, key2, 0o600); err != nil {
		t.Fatal(err)
	}
	// Within the interval the files are not read again.
	if cn, err := handshake(addr, trust); err != nil || cn != "server-1" {
		t.Fatalf("before the interval passed: %q, %v", cn, err)
	}
	advance()
	if cn, err := handshake(addr, trust); err != nil || cn != "server-2" {
		t.Fatalf("after rotation: %q, %v; want server-2", cn, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reports) != 2 || reports[1] != nil {
		t.Errorf("reports: %v; want the rejection then a nil for the reload", reports)
	}
}

func TestServerAndClientRefuseIncompleteFiles(t *testing.T) {
	dir := t.TempDir()
	f := tlstest.NewCA(t, "ca").WriteFiles(dir, "x", "x")
	if _, err := Server(f.Cert, "", ""); err == nil {
		t.Error("Server without a key file")
	}
	if _, err := Server(f.Cert, f.Key, f.Key); err == nil {
		t.Error("Server with a client CA file holding no certificate")
	}
	if _, err := Server(f.Cert, f.CA, ""); err == nil {
		t.Error("Server with a key that does not match")
	}
	if _, err := Client("", f.Cert, ""); err == nil {
		t.Error("Client with a certificate and no key")
	}
	if _, err := Client(dir+"/missing", "", ""); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Client with a missing CA file: %v", err)
	}
}
