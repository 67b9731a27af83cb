package attempt

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"net/http"
)

// Credentials are what an endpoint's attempts carry besides the
// signature: its custom headers (secret values opened) and its receiver
// auth (a fixed Authorization header, or OAuth2 tokens fetched and
// shared between attempts). The values are never logged, traced nor
// written to a result. Safe for concurrent use.
type Credentials struct {
	header http.Header
	// authorization is the fixed Authorization header (basic, bearer).
	authorization []string
	tokens        *tokenSource
	// tls, for an endpoint with a client certificate, is an HTTP client
	// of its own (its connection pool carries that certificate), whose
	// dials the tenant's guard checks.
	tls *http.Client
}

// CredentialSpec is what Credentials are made of: the opened values.
type CredentialSpec struct {
	// Header holds the endpoint's custom headers (canonical names).
	Header http.Header
	// At most one of Basic, Bearer and OAuth2 is set.
	Basic  *BasicAuth
	Bearer string
	OAuth2 *OAuth2
	// ClientCert, if set, is presented to the receiver (mutual TLS);
	// RootCAs, if set, replaces the system's roots for the receiver's
	// certificate.
	ClientCert *tls.Certificate
	RootCAs    *x509.CertPool
}

// BasicAuth is HTTP basic authentication's user and password.
type BasicAuth struct{ Username, Password string }

// Credentials returns the Credentials of spec for an endpoint of tenant:
// its tokens are fetched through tenant's guard. A nil result means
// none: nothing but the signature is sent.
func (c *Client) Credentials(tenant string, spec CredentialSpec) (*Credentials, error) {
	cr := &Credentials{header: spec.Header}
	if spec.ClientCert != nil || spec.RootCAs != nil {
		conf := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: spec.RootCAs}
		if spec.ClientCert != nil {
			conf.Certificates = []tls.Certificate{*spec.ClientCert}
		}
		cr.tls = c.newHTTP(c.policy.For(tenant), c.egressFor(tenant), conf)
	}
	switch {
	case spec.Basic != nil:
		cr.authorization = []string{"Basic " + base64.StdEncoding.EncodeToString([]byte(spec.Basic.Username+":"+spec.Basic.Password))}
	case spec.Bearer != "":
		cr.authorization = []string{"Bearer " + spec.Bearer}
	case spec.OAuth2 != nil:
		cr.tokens = newTokenSource(spec.OAuth2, c.forHTTP(tenant), c.now)
	case len(spec.Header) == 0 && cr.tls == nil:
		return nil, nil
	}
	return cr, nil
}

// tlsClient returns the endpoint's own HTTP client (nil: it has no
// client certificate nor CA bundle, the tenant's client serves it).
func (cr *Credentials) tlsClient() *http.Client {
	if cr == nil {
		return nil
	}
	return cr.tls
}

// Close closes the idle connections of cr's own HTTP client, if any:
// call it once cr is no longer used (the endpoint changed or is gone).
func (cr *Credentials) Close() {
	if cr.tlsClient() != nil {
		cr.tls.CloseIdleConnections()
	}
}

// apply sets cr's headers on h. They come before a transformation's and
// Hookline's own, which overwrite them (ingest refuses reserved names).
func (cr *Credentials) apply(h http.Header) {
	if cr == nil {
		return
	}
	for k, v := range cr.header {
		h[k] = v
	}
}

// authorize sets h's Authorization header, when cr has auth, and says
// which OAuth2 token it sent (zero: none) and whether that token was
// fetched for this attempt. An error is the token endpoint's failure.
func (cr *Credentials) authorize(ctx context.Context, h http.Header, stale uint64) (gen uint64, fresh bool, err error) {
	switch {
	case cr == nil:
		return 0, false, nil
	case cr.authorization != nil:
		h["Authorization"] = cr.authorization
		return 0, false, nil
	case cr.tokens != nil:
		t, fresh, err := cr.tokens.token(ctx, stale)
		if err != nil {
			return 0, false, err
		}
		h["Authorization"] = t.header
		return t.gen, fresh, nil
	}
	return 0, false, nil
}
