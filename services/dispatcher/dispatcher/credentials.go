package dispatcher

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/keyring"
	"github.com/hookline/hookline/services/dispatcher/attempt"
)

// credentials caches each endpoint's attempt.Credentials (its custom
// headers, receiver auth and client certificate, secret values opened;
// its OAuth2 token),
// made again only when the endpoint's record changes (its version: every change bumps it, a rekey too), so
// an attempt opens nothing. Safe for concurrent use.
type credentials struct {
	keys   *keyring.Keyring
	client *attempt.Client
	mu     sync.Mutex
	m      map[string]cachedCredentials
	// noticed is, per endpoint, the expiry of the client certificate an
	// endpoint.client_certificate_expiring notice went out for
	// (expiring).
	noticed map[string]time.Time
}

type cachedCredentials struct {
	version uint64
	creds   *attempt.Credentials
}

func newCredentials(keys *keyring.Keyring, client *attempt.Client) *credentials {
	return &credentials{keys: keys, client: client, m: map[string]cachedCredentials{}, noticed: map[string]time.Time{}}
}

// get returns the Credentials of ep (nil when it has none). An error (a
// credential that does not open, see keyring) says what the operator
// must fix; it never holds a value.
func (c *credentials) get(ep *hooklinev1.EndpointRecord) (*attempt.Credentials, error) {
	e := ep.GetEndpoint()
	if len(e.GetHeaders()) == 0 && e.GetAuth().GetMethod() == nil && e.GetClientTls() == nil {
		return nil, nil
	}
	id := e.GetId()
	c.mu.Lock()
	cc, ok := c.m[id]
	c.mu.Unlock()
	if ok && cc.version == ep.GetVersion() {
		return cc.creds, nil
	}
	spec, err := c.spec(ep)
	if err != nil {
		return nil, err
	}
	creds, err := c.client.Credentials(e.GetTenantId(), spec)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	prev := c.m[id]
	if prev.version == ep.GetVersion() && prev.creds != nil {
		// Another attempt made them meanwhile: one set per version, so
		// the endpoint's attempts share one OAuth2 token.
		c.mu.Unlock()
		creds.Close()
		return prev.creds, nil
	}
	c.m[id] = cachedCredentials{version: ep.GetVersion(), creds: creds}
	c.mu.Unlock()
	if prev.creds != nil {
		prev.creds.Close() // attempts still using it finish on their connections
	}
	return creds, nil
}

// spec opens ep's credentials into what attempt.Credentials are made of.
func (c *credentials) spec(ep *hooklinev1.EndpointRecord) (attempt.CredentialSpec, error) {
	e := ep.GetEndpoint()
	opened := map[string]string{}
	for _, cr := range ep.GetCredentials() {
		v, err := c.keys.OpenCredential(e.GetTenantId(), e.GetId(), cr)
		if err != nil {
			return attempt.CredentialSpec{}, err
		}
		opened[cr.GetName()] = v
	}
	spec := attempt.CredentialSpec{Header: http.Header{}}
	for _, h := range e.GetHeaders() {
		v := h.GetValue()
		if h.GetSecret() {
			v = opened["header:"+strings.ToLower(h.GetName())]
		}
		spec.Header.Set(h.GetName(), v)
	}
	switch a := e.GetAuth(); {
	case a.GetBasic() != nil:
		spec.Basic = &attempt.BasicAuth{Username: a.GetBasic().GetUsername(), Password: opened["auth:password"]}
	case a.GetBearer() != nil:
		spec.Bearer = opened["auth:token"]
	case a.GetOauth2ClientCredentials() != nil:
		o := a.GetOauth2ClientCredentials()
		spec.OAuth2 = &attempt.OAuth2{TokenURL: o.GetTokenUrl(), ClientID: o.GetClientId(), ClientSecret: opened["auth:client_secret"], Scopes: o.GetScopes(), Audience: o.GetAudience()}
	}
	if t := e.GetClientTls(); t != nil {
		pair, err := tls.X509KeyPair([]byte(t.GetCertificate()), []byte(opened["tls:private_key"]))
		if err != nil {
			return attempt.CredentialSpec{}, fmt.Errorf("endpoint %s: client certificate: %w", e.GetId(), err)
		}
		spec.ClientCert = &pair
		if ca := t.GetCaBundle(); ca != "" {
			spec.RootCAs = x509.NewCertPool()
			spec.RootCAs.AppendCertsFromPEM([]byte(ca))
		}
	}
	return spec, nil
}

// certificateNoticeBefore is how long before its client certificate
// expires an endpoint's attempts bring an
// endpoint.client_certificate_expiring notice.
const certificateNoticeBefore = 14 * 24 * time.Hour

// expiring returns when ep's client certificate expires, and true, the
// first time it is asked within certificateNoticeBefore of that (or
// after it) for that certificate: the attempt that asks writes the
// notice. A new certificate (another expiry) is noticed again.
func (c *credentials) expiring(ep *hooklinev1.EndpointRecord, now time.Time) (time.Time, bool) {
	na := ep.GetEndpoint().GetClientTls().GetNotAfter()
	if na == nil {
		return time.Time{}, false
	}
	at := na.AsTime()
	if at.Sub(now) > certificateNoticeBefore {
		return time.Time{}, false
	}
	id := ep.GetEndpoint().GetId()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.noticed[id].Equal(at) {
		return time.Time{}, false
	}
	c.noticed[id] = at
	return at, true
}

// forget drops the Credentials of endpoints no longer served.
func (c *credentials) forget(ids []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		delete(c.noticed, id)
		if cc, ok := c.m[id]; ok && cc.creds != nil {
			cc.creds.Close()
		}
		delete(c.m, id)
	}
}
