package apikey

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"strings"

	"github.com/hookline/hookline/platform/filewatch"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Keys is the set of API keys ingest admits: entries fixed at start
// (--api-keys) and those of a keys file (--api-keys-file), read again
// when the file changes, so a key is added or revoked without a restart.
// A key in both is resolved by the fixed entry. It is safe for concurrent
// use.
type Keys struct {
	fixed *Registry
	file  *filewatch.File[*Registry] // nil without a keys file
}

// Load returns the Keys of entries and, when file is non-empty, of the
// keys file at that path: one entry per line, blank lines and lines
// starting with '#' ignored. minBits is as in Parse, for both the start
// and every reload (a reload with a weak key is rejected as a whole and
// the previous set kept). opts pace the re-reads and report them. At
// least one key must be configured at start; a reload may leave none.
func Load(entries []string, file string, minBits int, opts ...filewatch.Option) (*Keys, error) {
	fixed, err := parse(entries, minBits, func(i int) string { return fmt.Sprintf("--api-keys entry %d", i+1) })
	if err != nil {
		return nil, err
	}
	k := &Keys{fixed: fixed}
	if file != "" {
		k.file, err = filewatch.Load(func(contents [][]byte) (*Registry, error) {
			return parseFile(contents[0], file, minBits)
		}, []string{file}, opts...)
		if err != nil {
			return nil, fmt.Errorf("--api-keys-file: %w", err)
		}
	}
	if fixed.Len() == 0 && (k.file == nil || k.file.Get().Len() == 0) {
		return nil, fmt.Errorf("no API keys configured; set --api-keys (tenant:key,…) or --api-keys-file")
	}
	return k, nil
}

// parseFile reads a keys file's entries.
func parseFile(b []byte, name string, minBits int) (*Registry, error) {
	var entries []string
	var lines []int
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		entries = append(entries, line)
		lines = append(lines, n)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return parse(entries, minBits, func(i int) string { return fmt.Sprintf("%s line %d", name, lines[i]) })
}

// Reload reads the keys file now, if there is one: nil when it is
// unchanged or was taken, the error when it was rejected (the previous
// keys stay in force).
func (k *Keys) Reload() error {
	if k.file == nil {
		return nil
	}
	return k.file.Reload()
}

// Resolve returns the principal key authenticates.
func (k *Keys) Resolve(key string) (Principal, bool) {
	return k.ResolveSum(sha256.Sum256([]byte(key)))
}

// ResolveSum returns the principal of the key whose SHA-256 is sum (a
// console session holds only that).
func (k *Keys) ResolveSum(sum [sha256.Size]byte) (Principal, bool) {
	if p, ok := k.fixed.ResolveSum(sum); ok {
		return p, true
	}
	if k.file != nil {
		return k.file.Get().ResolveSum(sum)
	}
	return Principal{}, false
}

// Authenticate returns the principal of an authorization value
// "Bearer <key>" (the scheme in any case), or an UNAUTHENTICATED status:
// one home for the check every way in makes (the gRPC interceptor, the
// gRPC tap and the HTTP/JSON gateway, both before any body is read).
func (k *Keys) Authenticate(header string) (Principal, error) {
	scheme, key, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || key == "" {
		return Principal{}, status.Error(codes.Unauthenticated, "missing API key: send metadata \"authorization: Bearer <key>\"")
	}
	p, ok := k.Resolve(key)
	if !ok {
		return Principal{}, status.Error(codes.Unauthenticated, "invalid API key")
	}
	return p, nil
}

type principalKey struct{}

// TenantFrom returns the authenticated tenant of a request context.
func TenantFrom(ctx context.Context) string {
	return PrincipalFrom(ctx).Tenant
}

// PrincipalFrom returns the authenticated principal of a request context.
func PrincipalFrom(ctx context.Context) Principal {
	p, _ := ctx.Value(principalKey{}).(Principal)
	return p
}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// AuthFunc authenticates "authorization: Bearer <key>" for the gRPC auth
// interceptor, checks that the key's scope admits the method called
// (PERMISSION_DENIED naming the scope needed otherwise) and puts the
// key's principal in the context.
func (k *Keys) AuthFunc(ctx context.Context) (context.Context, error) {
	var header string
	if v := metadata.ValueFromIncomingContext(ctx, "authorization"); len(v) > 0 {
		header = v[0]
	}
	p, err := k.Authenticate(header)
	if err != nil {
		return nil, err
	}
	method, _ := grpc.Method(ctx)
	if !p.Scope.Allows(method) {
		return nil, status.Error(codes.PermissionDenied, deniedMessage(p.Scope, method))
	}
	return WithPrincipal(ctx, p), nil
}
