package dispatcher

import (
	"bytes"
	"sync"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/keyring"
	"github.com/hookline/hookline/sdk/sign"
)

// signers caches each endpoint's Signer for its active secrets, so an
// attempt neither opens sealed secrets nor parses them nor builds HMAC
// state: secrets are opened (decrypted) only when the active set
// changes — a rotation, an expiring secret, a rekey, a restart. Safe for
// concurrent use.
type signers struct {
	keys *keyring.Keyring
	mu   sync.Mutex
	m    map[string]*cachedSigner
}

type cachedSigner struct {
	secrets []*hooklinev1.EndpointSecret // active secrets as stored, current first
	signer  *sign.Signer
}

func newSigners(keys *keyring.Keyring) *signers {
	return &signers{keys: keys, m: map[string]*cachedSigner{}}
}

// get returns the Signer of ep's secrets active at now. An error (a
// secret that does not open, see keyring) says what the operator must
// fix.
func (c *signers) get(ep *hooklinev1.EndpointRecord, now time.Time) (*sign.Signer, error) {
	id := ep.GetEndpoint().GetId()
	c.mu.Lock()
	cs := c.m[id]
	c.mu.Unlock()
	if cs != nil && sameActive(cs.secrets, ep, now) {
		return cs.signer, nil
	}
	active := activeSecrets(ep, now)
	plain := make([]string, len(active))
	for i, es := range active {
		var err error
		if plain[i], err = c.keys.Open(ep.GetEndpoint().GetTenantId(), id, es); err != nil {
			return nil, err
		}
	}
	s, err := sign.NewSigner(plain...)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.m[id] = &cachedSigner{secrets: active, signer: s}
	c.mu.Unlock()
	return s, nil
}

// forget drops the Signers of endpoints no longer served.
func (c *signers) forget(ids []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		delete(c.m, id)
	}
}

// sameActive reports whether ep's secrets active at now are cached, in
// order, without allocating. Secrets compare as stored: a sealed secret
// by its key id, nonce and ciphertext (a fresh nonce per seal), one in
// the clear by its text.
func sameActive(cached []*hooklinev1.EndpointSecret, ep *hooklinev1.EndpointRecord, now time.Time) bool {
	i := 0
	for _, sec := range ep.GetSecrets() {
		if exp := sec.GetExpiresAt(); exp != nil && !exp.AsTime().After(now) {
			continue
		}
		if i >= len(cached) || !sameSecret(cached[i], sec) {
			return false
		}
		i++
	}
	return i == len(cached)
}

func sameSecret(a, b *hooklinev1.EndpointSecret) bool {
	sa, sb := a.GetSealed(), b.GetSealed()
	return a.GetSecret() == b.GetSecret() && (sa == nil) == (sb == nil) &&
		sa.GetKeyId() == sb.GetKeyId() && bytes.Equal(sa.GetNonce(), sb.GetNonce()) && bytes.Equal(sa.GetCiphertext(), sb.GetCiphertext())
}

// activeSecrets returns the endpoint's secrets that still sign at now:
// the current one and any rotated-out one inside its grace period.
func activeSecrets(ep *hooklinev1.EndpointRecord, now time.Time) []*hooklinev1.EndpointSecret {
	out := make([]*hooklinev1.EndpointSecret, 0, len(ep.GetSecrets()))
	for _, sec := range ep.GetSecrets() {
		if exp := sec.GetExpiresAt(); exp != nil && !exp.AsTime().After(now) {
			continue
		}
		out = append(out, sec)
	}
	return out
}
