package ingest

// An endpoint's custom headers (Endpoint.headers): checked, their
// secret values sealed into the record's credentials, and stored and
// answered without those values.

import (
	"fmt"
	"strings"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/transform"
)

// Limits of an endpoint's custom headers.
const (
	maxHeaders           = 20 // also the proto's rule
	maxCustomHeaderBytes = 8 << 10
)

// headerCredential is the credential name of secret header name.
func headerCredential(name string) string { return "header:" + strings.ToLower(name) }

// setHeaders makes in rec's custom headers: each checked, a secret
// one's value sealed into rec's credentials (an empty value keeps the
// one it had under the same name) and left out of the endpoint, and the
// credentials of headers no longer secret dropped. rec's auth must be
// set first: authorization is reserved when it is.
func (x *endpointSecrets) setHeaders(rec *hooklinev1.EndpointRecord, in []*hooklinev1.EndpointHeader) error {
	ep := rec.GetEndpoint()
	if len(in) > maxHeaders {
		return invalid("headers", "%d headers, at most %d", len(in), maxHeaders)
	}
	old := map[string]*hooklinev1.EndpointCredential{}
	var kept []*hooklinev1.EndpointCredential
	for _, c := range rec.GetCredentials() {
		if strings.HasPrefix(c.GetName(), "header:") {
			old[c.GetName()] = c
			continue
		}
		kept = append(kept, c)
	}
	seen := map[string]bool{}
	out := make([]*hooklinev1.EndpointHeader, 0, len(in))
	size := 0
	for i, h := range in {
		field := fmt.Sprintf("headers[%d]", i)
		name := h.GetName()
		if err := checkHeaderName(name, hasAuth(ep)); err != nil {
			return invalid(field+".name", "%v", err)
		}
		lower := strings.ToLower(name)
		if seen[lower] {
			return invalid(field+".name", "%q appears twice (names are case-insensitive); give each header once", name)
		}
		seen[lower] = true
		value := h.GetValue()
		if err := checkHeaderValue(value); err != nil {
			return invalid(field+".value", "%v", err)
		}
		stored := &hooklinev1.EndpointHeader{Name: name, Secret: h.GetSecret()}
		switch {
		case !h.GetSecret() && value == "":
			return invalid(field+".value", "is empty; give a value or remove the header")
		case !h.GetSecret():
			stored.Value = value
		case value == "" && old[headerCredential(name)] != nil:
			// A secret's value is never answered: sending back what was
			// read keeps it.
			c := old[headerCredential(name)]
			v, err := x.openCredential(rec, c)
			if err != nil {
				return err
			}
			value = v
			kept = append(kept, c)
			stored.ValueSet = true
		case value == "":
			return invalid(field+".value", "is empty; a secret header needs a value (an empty value keeps an existing secret header's value, and %q has none)", name)
		default:
			kept = append(kept, x.keyring.SealCredential(ep.GetTenantId(), ep.GetId(), headerCredential(name), value))
			stored.ValueSet = true
		}
		size += len(name) + len(value)
		out = append(out, stored)
	}
	if size > maxCustomHeaderBytes {
		return invalid("headers", "names and values are %d bytes in all, at most %d (8 KiB); send fewer or shorter headers", size, maxCustomHeaderBytes)
	}
	if len(out) == 0 {
		out = nil
	}
	ep.Headers = out
	rec.Credentials = kept
	return nil
}

// checkHeaderName refuses a name that is not an HTTP token or is
// reserved: Hookline's own headers, hop-by-hop ones, and authorization
// when the endpoint has receiver auth.
func checkHeaderName(name string, authSet bool) error {
	if name == "" {
		return fmt.Errorf("is required")
	}
	for i := 0; i < len(name); i++ {
		if !headerTokenChar(name[i]) {
			return fmt.Errorf("%q is not an HTTP header name (letters, digits and !#$%%&'*+-.^_`|~ only)", name)
		}
	}
	if transform.ReservedHeader(name) || strings.EqualFold(name, "user-agent") {
		return fmt.Errorf("%q is reserved: Hookline sets it (signature, content, tracing) or it is a hop-by-hop header; remove it", name)
	}
	if authSet && strings.EqualFold(name, "authorization") {
		return fmt.Errorf("%q is reserved while the endpoint has auth, which sets it; remove the header or the auth", name)
	}
	return nil
}

// checkHeaderValue refuses control characters (a header injection).
func checkHeaderValue(v string) error {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return fmt.Errorf("has a control character at byte %d; header values are printable text", i)
		}
	}
	return nil
}

func headerTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
