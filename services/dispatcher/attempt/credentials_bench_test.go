package attempt

import (
	"net/http"
	"testing"
)

// BenchmarkCredentialsWithCachedToken is what an endpoint's custom
// headers and a cached OAuth2 token add to an attempt: both set on the
// request's headers, the token from the cache.
//
//	go test -run '^$' -bench CredentialsWithCachedToken -benchmem ./attempt
func BenchmarkCredentialsWithCachedToken(b *testing.B) {
	te := newTokenEndpoint(b)
	c := New(mustPolicy(b))
	cr := te.creds(b, c, clientSecret)
	cr.header = http.Header{"X-Route": {"eu-1"}, "X-Api-Key": {"k-1"}}
	h := http.Header{}
	if _, fresh, err := cr.authorize(b.Context(), h, 0); err != nil || !fresh {
		b.Fatalf("first token: %v", err)
	}
	b.ReportAllocs()
	for b.Loop() {
		clear(h)
		cr.apply(h)
		if gen, fresh, err := cr.authorize(b.Context(), h, 0); err != nil || fresh || gen != 1 {
			b.Fatalf("gen %d fresh %v: %v", gen, fresh, err)
		}
	}
}
