package endpoints

import (
	"fmt"
	"testing"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
)

// BenchmarkMatching looks up the endpoints of one event type (10) among
// a tenant's 1,000, as every publish does twice.
func BenchmarkMatching(b *testing.B) {
	s := NewStore()
	for i := range 1000 {
		s.Put(&hooklinev1.EndpointRecord{Version: 1, Endpoint: &hooklinev1.Endpoint{
			Id: fmt.Sprintf("ep_%04d", i), TenantId: "acme", EventTypes: []string{fmt.Sprintf("type.%d", i%100)},
		}})
	}
	b.ReportAllocs()
	for b.Loop() {
		if n := len(s.Matching("acme", "type.7")); n != 10 {
			b.Fatalf("%d endpoints, want 10", n)
		}
	}
}
