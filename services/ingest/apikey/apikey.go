// Package apikey maps API keys to tenants. Keys are held only as SHA-256
// hashes; a key never appears in logs or errors.
package apikey

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Registry resolves API keys to tenants. It is immutable and safe for
// concurrent use.
type Registry struct {
	tenants map[[sha256.Size]byte]string
}

// Parse builds a Registry from entries "tenant:key" or
// "tenant:sha256:<hex of the key's SHA-256>" (so a deployment's config
// need not hold the key itself).
func Parse(entries []string) (*Registry, error) {
	r := &Registry{tenants: map[[sha256.Size]byte]string{}}
	for i, e := range entries {
		tenant, key, ok := strings.Cut(e, ":")
		if !ok || tenant == "" || key == "" {
			return nil, fmt.Errorf("api key entry %d: want tenant:key or tenant:sha256:<hex>", i+1)
		}
		var h [sha256.Size]byte
		if hexed, isHash := strings.CutPrefix(key, "sha256:"); isHash {
			b, err := hex.DecodeString(hexed)
			if err != nil || len(b) != sha256.Size {
				return nil, fmt.Errorf("api key entry %d (tenant %s): sha256 must be 64 hex digits", i+1, tenant)
			}
			copy(h[:], b)
		} else {
			if len(key) < 16 {
				return nil, fmt.Errorf("api key entry %d (tenant %s): a key must be at least 16 characters", i+1, tenant)
			}
			h = sha256.Sum256([]byte(key))
		}
		r.tenants[h] = tenant
	}
	if len(r.tenants) == 0 {
		return nil, errors.New("no API keys configured; set --api-keys (tenant:key,…)")
	}
	return r, nil
}

// Tenant returns the tenant of key.
func (r *Registry) Tenant(key string) (string, bool) {
	t, ok := r.tenants[sha256.Sum256([]byte(key))]
	return t, ok
}

type tenantKey struct{}

// TenantFrom returns the authenticated tenant of a request context.
func TenantFrom(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey{}).(string)
	return t
}

// WithTenant returns ctx carrying tenant.
func WithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// AuthFunc authenticates "authorization: Bearer <key>" for the gRPC auth
// interceptor and puts the key's tenant in the context.
func (r *Registry) AuthFunc(ctx context.Context) (context.Context, error) {
	key, err := auth.AuthFromMD(ctx, "bearer")
	if err != nil {
		return nil, status.Error(codes.Unauthenticated, "missing API key: send metadata \"authorization: Bearer <key>\"")
	}
	tenant, ok := r.Tenant(key)
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "invalid API key")
	}
	return WithTenant(ctx, tenant), nil
}

// New returns a fresh random API key ("hk_" and 64 hex digits) for tenant
// and the --api-keys entry that admits it without holding it
// ("tenant:sha256:<hex>"). It is safe for concurrent use.
func New(tenant string) (key, entry string, err error) {
	if tenant == "" || strings.Contains(tenant, ":") || strings.Contains(tenant, ",") {
		return "", "", errors.New("tenant must be non-empty and contain no ':' or ','")
	}
	var raw [32]byte
	_, _ = rand.Read(raw[:]) // crypto/rand.Read never fails (Go 1.24+).
	key = "hk_" + hex.EncodeToString(raw[:])
	return key, HashedEntry(tenant, key), nil
}

// HashedEntry returns the --api-keys entry "tenant:sha256:<hex>" that
// admits key for tenant; the configuration then never holds the key.
func HashedEntry(tenant, key string) string {
	sum := sha256.Sum256([]byte(key))
	return tenant + ":sha256:" + hex.EncodeToString(sum[:])
}
