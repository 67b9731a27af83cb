package attempt

import "net/http"

// Credentials are what an endpoint's attempts carry besides the
// signature: its custom headers, secret values opened. The values are
// never logged, traced nor written to a result. Immutable once made, and
// safe for concurrent use.
type Credentials struct {
	header http.Header
}

// CredentialSpec is what Credentials are made of: the opened values.
type CredentialSpec struct {
	// Header holds the endpoint's custom headers (canonical names).
	Header http.Header
}

// Credentials returns the Credentials of spec for an endpoint of tenant.
// A nil result means none: nothing but the signature is sent.
func (c *Client) Credentials(_ string, spec CredentialSpec) (*Credentials, error) {
	if len(spec.Header) == 0 {
		return nil, nil
	}
	return &Credentials{header: spec.Header}, nil
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
