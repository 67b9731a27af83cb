// Package sign signs webhook attempts per the Standard Webhooks
// specification: HMAC-SHA256 over "id.timestamp.body", sent as
// "webhook-signature: v1,<base64>" with one signature per active secret,
// space-separated, so receivers keep verifying during a secret rotation.
package sign

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Header names of the Standard Webhooks specification.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts every Hookline signing secret.
const SecretPrefix = "whsec_"

// Key sizes accepted for a secret, in bytes.
const (
	minKeyLen = 24
	maxKeyLen = 64
	genKeyLen = 32
)

// ErrBadSecret is returned for a secret that is not "whsec_" followed by
// the base64 of 24 to 64 bytes.
var ErrBadSecret = errors.New("secret must be \"whsec_\" followed by base64 of 24 to 64 random bytes")

// GenerateSecret returns a fresh "whsec_…" secret of 32 random bytes.
func GenerateSecret() string {
	b := make([]byte, genKeyLen)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+).
	return SecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// ParseSecret returns the key bytes of a "whsec_…" secret.
func ParseSecret(s string) ([]byte, error) {
	rest, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return nil, ErrBadSecret
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil || len(key) < minKeyLen || len(key) > maxKeyLen {
		return nil, ErrBadSecret
	}
	return key, nil
}

// Signer signs with one or more keys; the first is the current one. A
// Signer is immutable and safe for concurrent use; it keeps a pool of
// HMAC states per key, so signing allocates only the header it returns.
type Signer struct {
	keys []key
}

type key struct {
	raw  []byte
	macs *sync.Pool // of hash.Hash: HMAC-SHA256 keyed with raw
}

// NewSigner parses secrets ("whsec_…", current first) into a Signer.
func NewSigner(secrets ...string) (*Signer, error) {
	if len(secrets) == 0 {
		return nil, errors.New("sign: at least one secret is required")
	}
	s := &Signer{keys: make([]key, 0, len(secrets))}
	for i, sec := range secrets {
		k, err := ParseSecret(sec)
		if err != nil {
			return nil, fmt.Errorf("sign: secret %d: %w", i, err)
		}
		s.keys = append(s.keys, key{raw: k, macs: &sync.Pool{New: func() any { return hmac.New(sha256.New, k) }}})
	}
	return s, nil
}

// Sign returns the webhook-signature header value for one attempt: a
// "v1,<base64>" signature per key, space-separated.
func (s *Signer) Sign(id string, ts time.Time, body []byte) string {
	var tsBuf [20]byte
	tsStr := strconv.AppendInt(tsBuf[:0], ts.Unix(), 10)
	out := make([]byte, 0, len(s.keys)*48)
	var sum [sha256.Size]byte
	for i, k := range s.keys {
		if i > 0 {
			out = append(out, ' ')
		}
		out = append(out, "v1,"...)
		out = base64.StdEncoding.AppendEncode(out, k.mac(sum[:0], id, tsStr, body))
	}
	return string(out)
}

// mac appends HMAC-SHA256(key, id "." ts "." body) to dst.
func (k key) mac(dst []byte, id string, ts []byte, body []byte) []byte {
	h := k.macs.Get().(hash.Hash)
	h.Reset()
	var pre [128]byte
	b := append(pre[:0], id...)
	b = append(b, '.')
	b = append(b, ts...)
	b = append(b, '.')
	h.Write(b)
	h.Write(body)
	dst = h.Sum(dst)
	k.macs.Put(h)
	return dst
}

// Verification errors.
var (
	ErrMissingHeaders      = errors.New("missing webhook-id, webhook-timestamp or webhook-signature")
	ErrBadTimestamp        = errors.New("webhook-timestamp is not a Unix time in seconds")
	ErrTimestampTooOld     = errors.New("webhook-timestamp is outside the tolerance")
	ErrNoMatchingSignature = errors.New("no signature matches")
)

// DefaultTolerance is how far a webhook-timestamp may be from now.
const DefaultTolerance = 5 * time.Minute

// Verify checks a received webhook as a receiver would: the timestamp is
// within tolerance of now and at least one v1 signature matches one of the
// signer's keys. It compares in constant time.
func (s *Signer) Verify(id, timestamp, signature string, body []byte, now time.Time, tolerance time.Duration) error {
	if id == "" || timestamp == "" || signature == "" {
		return ErrMissingHeaders
	}
	sec, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return ErrBadTimestamp
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return ErrTimestampTooOld
	}
	var sum [sha256.Size]byte
	for _, k := range s.keys {
		want := k.mac(sum[:0], id, []byte(timestamp), body)
		for _, part := range strings.Fields(signature) {
			v, sig, ok := strings.Cut(part, ",")
			if !ok || v != "v1" {
				continue
			}
			got, err := base64.StdEncoding.DecodeString(sig)
			if err == nil && hmac.Equal(got, want) {
				return nil
			}
		}
	}
	return ErrNoMatchingSignature
}
