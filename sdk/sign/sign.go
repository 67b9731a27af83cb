// Package sign signs webhook attempts per the Standard Webhooks
// specification: over "id.timestamp.body", HMAC-SHA256 with a shared
// "whsec_…" secret, sent as "v1,<base64>", or ed25519 with a "whsk_…"
// private key, sent as "v1a,<base64>" and verified with its "whpk_…"
// public key. The webhook-signature header holds one signature per
// active key, space-separated, so receivers keep verifying during a
// rotation.
package sign

import (
	"crypto/ed25519"
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

// SecretPrefix starts every HMAC (v1) signing secret.
const SecretPrefix = "whsec_"

// Prefixes of an ed25519 (v1a) key pair: the private key Hookline signs
// with and the public key a receiver verifies with.
const (
	PrivateKeyPrefix = "whsk_"
	PublicKeyPrefix  = "whpk_"
)

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

// ErrBadKey is returned for an ed25519 key that is not "whsk_" followed by
// the base64 of a 64-byte private key (or its 32-byte seed), or not
// "whpk_" followed by the base64 of a 32-byte public key.
var ErrBadKey = errors.New("ed25519 key must be \"whsk_\" followed by base64 of a 64-byte private key (or 32-byte seed), or \"whpk_\" followed by base64 of a 32-byte public key")

// GenerateKeyPair returns a fresh ed25519 key pair: the private key
// ("whsk_…", base64 of the 64-byte key) and its public key ("whpk_…").
func GenerateKeyPair() (private, public string) {
	pub, priv, _ := ed25519.GenerateKey(nil) // crypto/rand never fails (Go 1.24+)
	return PrivateKeyPrefix + base64.StdEncoding.EncodeToString(priv), PublicKeyPrefix + base64.StdEncoding.EncodeToString(pub)
}

// ParsePrivateKey returns the ed25519 private key of a "whsk_…" key.
func ParsePrivateKey(s string) (ed25519.PrivateKey, error) {
	rest, ok := strings.CutPrefix(s, PrivateKeyPrefix)
	if !ok {
		return nil, ErrBadKey
	}
	b, err := base64.StdEncoding.DecodeString(rest)
	switch {
	case err != nil:
		return nil, ErrBadKey
	case len(b) == ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(b), nil
	case len(b) == ed25519.PrivateKeySize:
		k := ed25519.PrivateKey(b)
		// The second half must be the public key of the first.
		if !ed25519.NewKeyFromSeed(k.Seed()).Equal(k) {
			return nil, ErrBadKey
		}
		return k, nil
	}
	return nil, ErrBadKey
}

// ParsePublicKey returns the ed25519 public key of a "whpk_…" key.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	rest, ok := strings.CutPrefix(s, PublicKeyPrefix)
	if !ok {
		return nil, ErrBadKey
	}
	b, err := base64.StdEncoding.DecodeString(rest)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, ErrBadKey
	}
	return ed25519.PublicKey(b), nil
}

// PublicKey returns the "whpk_…" public key of a "whsk_…" private key.
func PublicKey(private string) (string, error) {
	k, err := ParsePrivateKey(private)
	if err != nil {
		return "", err
	}
	return PublicKeyPrefix + base64.StdEncoding.EncodeToString(k.Public().(ed25519.PublicKey)), nil
}

// Asymmetric reports whether secret is an ed25519 ("whsk_…") key, signing
// v1a, rather than an HMAC secret signing v1.
func Asymmetric(secret string) bool { return strings.HasPrefix(secret, PrivateKeyPrefix) }

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
// HMAC states per HMAC key, so signing with HMAC keys allocates only the
// header it returns.
type Signer struct {
	keys []key
}

// key is one HMAC secret (macs set) or one ed25519 key pair (priv set,
// or only pub in a verifier).
type key struct {
	raw  []byte
	macs *sync.Pool // of hash.Hash: HMAC-SHA256 keyed with raw
	priv ed25519.PrivateKey
	pub  ed25519.PublicKey
}

// NewSigner parses secrets (current first) into a Signer: "whsec_…" HMAC
// secrets sign v1, "whsk_…" ed25519 private keys sign v1a.
func NewSigner(secrets ...string) (*Signer, error) {
	if len(secrets) == 0 {
		return nil, errors.New("sign: at least one secret is required")
	}
	s := &Signer{keys: make([]key, 0, len(secrets))}
	for i, sec := range secrets {
		if Asymmetric(sec) {
			priv, err := ParsePrivateKey(sec)
			if err != nil {
				return nil, fmt.Errorf("sign: secret %d: %w", i, err)
			}
			s.keys = append(s.keys, key{priv: priv, pub: priv.Public().(ed25519.PublicKey)})
			continue
		}
		k, err := ParseSecret(sec)
		if err != nil {
			return nil, fmt.Errorf("sign: secret %d: %w", i, err)
		}
		s.keys = append(s.keys, key{raw: k, macs: &sync.Pool{New: func() any { return hmac.New(sha256.New, k) }}})
	}
	return s, nil
}

// NewVerifier returns a Signer that only verifies, as a receiver does:
// with "whsec_…" secrets (v1) and "whpk_…" public keys (v1a). Its Sign
// must not be called.
func NewVerifier(keys ...string) (*Signer, error) {
	s := &Signer{keys: make([]key, 0, len(keys))}
	var hmacs []string
	for i, k := range keys {
		if !strings.HasPrefix(k, PublicKeyPrefix) {
			hmacs = append(hmacs, k)
			continue
		}
		pub, err := ParsePublicKey(k)
		if err != nil {
			return nil, fmt.Errorf("sign: key %d: %w", i, err)
		}
		s.keys = append(s.keys, key{pub: pub})
	}
	if len(hmacs) > 0 {
		h, err := NewSigner(hmacs...)
		if err != nil {
			return nil, err
		}
		s.keys = append(s.keys, h.keys...)
	}
	if len(s.keys) == 0 {
		return nil, errors.New("sign: at least one key is required")
	}
	return s, nil
}

// Sign returns the webhook-signature header value for one attempt: a
// "v1,<base64>" (HMAC) or "v1a,<base64>" (ed25519) signature per key,
// space-separated.
func (s *Signer) Sign(id string, ts time.Time, body []byte) string {
	var tsBuf [20]byte
	tsStr := strconv.AppendInt(tsBuf[:0], ts.Unix(), 10)
	out := make([]byte, 0, len(s.keys)*48)
	var sum [sha256.Size]byte
	for i, k := range s.keys {
		if i > 0 {
			out = append(out, ' ')
		}
		if k.priv != nil {
			out = append(out, "v1a,"...)
			out = base64.StdEncoding.AppendEncode(out, ed25519.Sign(k.priv, signedContent(id, tsStr, body)))
			continue
		}
		out = append(out, "v1,"...)
		out = base64.StdEncoding.AppendEncode(out, k.mac(sum[:0], id, tsStr, body))
	}
	return string(out)
}

// signedContent returns id "." ts "." body, what an ed25519 key signs
// (it hashes its message twice, so it needs it whole).
func signedContent(id string, ts, body []byte) []byte {
	b := make([]byte, 0, len(id)+len(ts)+2+len(body))
	b = append(b, id...)
	b = append(b, '.')
	b = append(b, ts...)
	b = append(b, '.')
	return append(b, body...)
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
// within tolerance of now and at least one signature matches one of the
// signer's keys (v1 for an HMAC secret, compared in constant time; v1a
// for an ed25519 key).
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
		var want, content []byte
		scheme := "v1"
		if k.pub != nil {
			scheme, content = "v1a", signedContent(id, []byte(timestamp), body)
		} else {
			want = k.mac(sum[:0], id, []byte(timestamp), body)
		}
		for _, part := range strings.Fields(signature) {
			v, sig, ok := strings.Cut(part, ",")
			if !ok || v != scheme {
				continue
			}
			got, err := base64.StdEncoding.DecodeString(sig)
			if err != nil {
				continue
			}
			if k.pub != nil && ed25519.Verify(k.pub, content, got) || k.pub == nil && hmac.Equal(got, want) {
				return nil
			}
		}
	}
	return ErrNoMatchingSignature
}
