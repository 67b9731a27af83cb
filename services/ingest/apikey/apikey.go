// Package apikey maps API keys to a tenant and a scope. Keys are held
// only as SHA-256 hashes; a key never appears in logs or errors.
//
// An entry admitting a key is "tenant:key", "tenant:scope:key",
// "tenant:sha256:<hex>" or "tenant:scope:sha256:<hex>" (the hex of the
// key's SHA-256, so the configuration need not hold the key itself);
// scope is publish, read or admin, and an entry without one is admin.
package apikey

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Principal is who a key authenticates: a tenant, with what it may do.
type Principal struct {
	Tenant string
	Scope  Scope
}

// Registry resolves API keys to principals. It is immutable and safe for
// concurrent use.
type Registry struct {
	keys map[[sha256.Size]byte]Principal
}

// Parse builds a Registry from entries (see the package comment),
// refusing an empty list and, when minBits > 0, any key given in the
// clear that Measure finds unable to hold minBits bits of randomness or
// made of words and patterns (hashed entries cannot be checked: make
// their keys with New).
func Parse(entries []string, minBits int) (*Registry, error) {
	r, err := parse(entries, minBits, func(i int) string { return fmt.Sprintf("api key entry %d", i+1) })
	if err != nil {
		return nil, err
	}
	if len(r.keys) == 0 {
		return nil, errors.New("no API keys configured; set --api-keys (tenant:key,…) or --api-keys-file")
	}
	return r, nil
}

// parse builds a Registry from entries, naming entry i in errors with
// where(i); an empty list gives an empty Registry.
func parse(entries []string, minBits int, where func(i int) string) (*Registry, error) {
	r := &Registry{keys: map[[sha256.Size]byte]Principal{}}
	for i, e := range entries {
		p, h, err := parseEntry(e, minBits)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where(i), err)
		}
		r.keys[h] = p
	}
	return r, nil
}

func parseEntry(e string, minBits int) (Principal, [sha256.Size]byte, error) {
	var h [sha256.Size]byte
	tenant, key, ok := strings.Cut(e, ":")
	if !ok || tenant == "" || key == "" {
		return Principal{}, h, errors.New("want tenant:[scope:]key or tenant:[scope:]sha256:<hex>")
	}
	p := Principal{Tenant: tenant, Scope: ScopeAdmin}
	for _, sc := range Scopes {
		if rest, named := strings.CutPrefix(key, string(sc)+":"); named && rest != "" {
			p.Scope, key = sc, rest
			break
		}
	}
	if hexed, isHash := strings.CutPrefix(key, "sha256:"); isHash {
		b, err := hex.DecodeString(hexed)
		if err != nil || len(b) != sha256.Size {
			return Principal{}, h, fmt.Errorf("tenant %s: sha256 must be 64 hex digits", tenant)
		}
		copy(h[:], b)
		return p, h, nil
	}
	if len(key) < 16 {
		return Principal{}, h, fmt.Errorf("tenant %s: a key must be at least 16 characters", tenant)
	}
	if err := tooWeak(key, minBits); err != nil {
		return Principal{}, h, fmt.Errorf("tenant %s: %w", tenant, err)
	}
	return p, sha256.Sum256([]byte(key)), nil
}

// Resolve returns the principal key authenticates.
func (r *Registry) Resolve(key string) (Principal, bool) {
	return r.ResolveSum(sha256.Sum256([]byte(key)))
}

// ResolveSum returns the principal of the key whose SHA-256 is sum.
func (r *Registry) ResolveSum(sum [sha256.Size]byte) (Principal, bool) {
	p, ok := r.keys[sum]
	return p, ok
}

// Tenant returns the tenant of key.
func (r *Registry) Tenant(key string) (string, bool) {
	p, ok := r.Resolve(key)
	return p.Tenant, ok
}

// Len returns how many keys r admits.
func (r *Registry) Len() int { return len(r.keys) }

// New returns a fresh random API key ("hk_" and 64 hex digits: 256
// bits) for tenant and the entry that admits it with scope without
// holding it ("tenant:scope:sha256:<hex>"). It is safe for concurrent use.
func New(tenant string, scope Scope) (key, entry string, err error) {
	if tenant == "" || strings.ContainsAny(tenant, ":,#") || strings.TrimSpace(tenant) != tenant {
		return "", "", errors.New("tenant must be non-empty and contain no ':', ',', '#' or surrounding spaces")
	}
	if _, err := ParseScope(string(scope)); err != nil {
		return "", "", err
	}
	var raw [32]byte
	_, _ = rand.Read(raw[:]) // crypto/rand.Read never fails (Go 1.24+).
	key = "hk_" + hex.EncodeToString(raw[:])
	return key, HashedEntry(tenant, scope, key), nil
}

// HashedEntry returns the entry "tenant:scope:sha256:<hex>" that admits
// key for tenant with scope; the configuration then never holds the key.
func HashedEntry(tenant string, scope Scope, key string) string {
	sum := sha256.Sum256([]byte(key))
	return tenant + ":" + string(scope) + ":sha256:" + hex.EncodeToString(sum[:])
}
