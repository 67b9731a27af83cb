// Package tlstest makes throwaway certificate authorities and the
// certificates they sign, for tests of TLS and mutual TLS.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a throwaway certificate authority.
type CA struct {
	t    testing.TB
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate, PEM-encoded.
	PEM []byte
}

// NewCA makes a CA named name, valid for a day.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{t: t, cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Issue signs a certificate for commonName, usable by servers and
// clients, valid for 127.0.0.1, ::1 and localhost; it returns the
// certificate and its private key, PEM-encoded.
func (ca *CA) Issue(commonName string) (certPEM, keyPEM []byte) {
	ca.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		ca.t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(ca.t),
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		ca.t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		ca.t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

// Files is where WriteFiles put a CA and a certificate it issued.
type Files struct{ CA, Cert, Key string }

// WriteFiles issues a certificate for commonName and writes it, its key
// and the CA certificate to dir as <name>.crt, <name>.key and
// <name>-ca.crt.
func (ca *CA) WriteFiles(dir, name, commonName string) Files {
	ca.t.Helper()
	cert, key := ca.Issue(commonName)
	f := Files{CA: filepath.Join(dir, name+"-ca.crt"), Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key")}
	for path, b := range map[string][]byte{f.CA: ca.PEM, f.Cert: cert, f.Key: key} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			ca.t.Fatal(err)
		}
	}
	return f
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// MutualTLS is what a mutual-TLS test needs, written to a temporary
// directory: a CA, a server certificate ("server-1") and a client
// certificate ("client-1") it signed, and a client certificate
// ("foreign") that another CA signed. Each Files' CA is the server's CA,
// the one clients trust.
type MutualTLS struct {
	CA                      *CA
	Server, Client, Foreign Files
}

// NewMutualTLS makes a MutualTLS.
func NewMutualTLS(t testing.TB, dir string) MutualTLS {
	t.Helper()
	ca := NewCA(t, "hookline test CA")
	m := MutualTLS{CA: ca, Server: ca.WriteFiles(dir, "server", "server-1"), Client: ca.WriteFiles(dir, "client", "client-1"),
		Foreign: NewCA(t, "another CA").WriteFiles(dir, "foreign", "foreign")}
	m.Foreign.CA = m.Server.CA
	return m
}
