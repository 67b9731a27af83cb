// Package tlsconf builds the TLS configurations of Hookline's gRPC edge:
// a server configuration whose certificate (and client CA) is re-read
// from its files when they change, for wrapping a net.Listener with
// tls.NewListener, and a client configuration for the CLI and tests.
//
// TLS is applied at the listener rather than through gRPC's transport
// credentials so that every protocol served on the port (gRPC and an
// HTTP gateway sharing it) gets the same TLS and the same client
// certificate checks.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/hookline/hookline/platform/filewatch"
)

// NextProtos are the ALPN protocols the server offers: HTTP/2 for gRPC
// (gRPC clients require it) and HTTP/1.1 for a gateway on the same port.
var NextProtos = []string{"h2", "http/1.1"}

// Server returns a server *tls.Config (TLS 1.2 or newer) that presents
// the certificate chain in certFile with the private key in keyFile.
// With clientCAFile non-empty it requires a client certificate signed by
// a CA in that PEM file. The files are read again when they change (at
// most once per filewatch interval, at a handshake; see package
// filewatch): a new certificate is served from the next handshake on,
// without a restart; a change that does not load (a certificate and key
// that do not match, say, while only one of them was replaced) is
// reported through the filewatch options and the previous pair kept.
// The returned configuration is safe for concurrent use.
func Server(certFile, keyFile, clientCAFile string, opts ...filewatch.Option) (*tls.Config, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("a TLS certificate needs both its certificate file and its key file")
	}
	paths := []string{certFile, keyFile}
	if clientCAFile != "" {
		paths = append(paths, clientCAFile)
	}
	files, err := filewatch.Load(func(contents [][]byte) (*tls.Config, error) {
		return serverConfig(contents, certFile, clientCAFile)
	}, paths, opts...)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: NextProtos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return files.Get(), nil
		},
	}, nil
}

// serverConfig is the configuration one version of the files gives.
func serverConfig(contents [][]byte, certFile, clientCAFile string) (*tls.Config, error) {
	cert, err := tls.X509KeyPair(contents[0], contents[1])
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s and its key: %w", certFile, err)
	}
	c := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		NextProtos:   NextProtos,
		Certificates: []tls.Certificate{cert},
	}
	if clientCAFile != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(contents[2]) {
			return nil, fmt.Errorf("client CA file %s holds no PEM certificate", clientCAFile)
		}
		c.ClientCAs = pool
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// Client returns a client *tls.Config (TLS 1.2 or newer) that trusts the
// CAs in the PEM file caFile (the system roots when empty) and, with
// certFile and keyFile, presents that client certificate.
func Client(caFile, certFile, keyFile string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate", caFile)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("a client certificate needs both its certificate file and its key file")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate %s and its key: %w", certFile, err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}
