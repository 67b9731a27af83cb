// Package pagetoken makes and checks list page tokens: opaque to the
// caller, tamper-evident (an HMAC-SHA256 over the token), and valid only
// for the tenant and the query they were issued for. A token carries the
// last id of the page (keyset pagination), so a page is stable whatever
// is added meanwhile: ids sort by creation time and new ones come after.
package pagetoken

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
)

const (
	version = 1
	macLen  = 16
)

// ErrInvalid is returned by Decode for a token that was not issued by a
// Codec with the same key for this tenant and query.
var ErrInvalid = errors.New("page token is invalid: it was altered, or issued for another tenant or other filters; list again without it")

// Codec signs and checks tokens with one key. Replicas that serve the
// same callers need the same key. It is safe for concurrent use.
type Codec struct {
	key []byte
}

// New returns a Codec signing with key (any length; 32 random bytes are
// plenty).
func New(key []byte) *Codec { return &Codec{key: append([]byte(nil), key...)} }

// Encode returns the token that resumes query after the id after, for
// tenant. query is the canonical form of the list's filters.
func (c *Codec) Encode(tenant, query, after string) string {
	b := make([]byte, 0, 1+len(after)+macLen)
	b = append(b, version)
	b = append(b, after...)
	b = append(b, c.mac(tenant, query, after)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Decode returns the id a token resumes after, or ErrInvalid.
func (c *Codec) Decode(tenant, query, token string) (string, error) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(token)
	if err != nil || len(b) < 1+macLen || b[0] != version {
		return "", ErrInvalid
	}
	after := string(b[1 : len(b)-macLen])
	if !hmac.Equal(b[len(b)-macLen:], c.mac(tenant, query, after)) {
		return "", ErrInvalid
	}
	return after, nil
}

func (c *Codec) mac(tenant, query, after string) []byte {
	m := hmac.New(sha256.New, c.key)
	for _, s := range []string{tenant, query, after} {
		m.Write([]byte(s))
		m.Write([]byte{0})
	}
	return m.Sum(nil)[:macLen]
}
