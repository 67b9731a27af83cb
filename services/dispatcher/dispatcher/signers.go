package dispatcher

import (
	"slices"
	"sync"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/sign"
)

// signers caches each endpoint's Signer for its active secrets, so an
// attempt neither parses secrets nor builds HMAC state; a rotation or an
// expiring secret makes a new one. Safe for concurrent use.
type signers struct {
	mu sync.Mutex
	m  map[string]*cachedSigner
}

type cachedSigner struct {
	secrets []string // active secrets, current first
	signer  *sign.Signer
}

func newSigners() *signers { return &signers{m: map[string]*cachedSigner{}} }

// get returns the Signer of ep's secrets active at now.
func (c *signers) get(ep *hooklinev1.EndpointRecord, now time.Time) (*sign.Signer, error) {
	id := ep.GetEndpoint().GetId()
	c.mu.Lock()
	cs := c.m[id]
	c.mu.Unlock()
	if cs != nil && sameActive(cs.secrets, ep, now) {
		return cs.signer, nil
	}
	active := activeSecrets(ep, now)
	s, err := sign.NewSigner(active...)
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
// order, without allocating.
func sameActive(cached []string, ep *hooklinev1.EndpointRecord, now time.Time) bool {
	i := 0
	for _, sec := range ep.GetSecrets() {
		if exp := sec.GetExpiresAt(); exp != nil && !exp.AsTime().After(now) {
			continue
		}
		if i >= len(cached) || cached[i] != sec.GetSecret() {
			return false
		}
		i++
	}
	return i == len(cached)
}

// activeSecrets returns the endpoint's secrets that still sign at now:
// the current one and any rotated-out one inside its grace period.
func activeSecrets(ep *hooklinev1.EndpointRecord, now time.Time) []string {
	out := make([]string, 0, len(ep.GetSecrets()))
	for _, sec := range ep.GetSecrets() {
		if exp := sec.GetExpiresAt(); exp != nil && !exp.AsTime().After(now) {
			continue
		}
		out = append(out, sec.GetSecret())
	}
	return slices.Clip(out)
}
