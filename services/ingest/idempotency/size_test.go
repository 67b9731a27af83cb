package idempotency

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/sdk/ids"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestIdemViewRetainsNoPerEndpointStatePerClaim: every ingest keeps each
// idempotency claim for twice its TTL (48 h by default), so what a claim
// costs in memory must not grow with its fan-out (F8: a DeliveryRef per
// target endpoint, ~100–150 KB per claim at 1,000 endpoints). 200
// claims of 1,000 endpoints each, in the form main writes them (a
// DeliveryRef per endpoint), may retain at most 2 KiB each.
func TestIdemViewRetainsNoPerEndpointStatePerClaim(t *testing.T) {
	const claims, endpoints, bound = 200, 1000, 2 << 10
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	recs := make([]*kgo.Record, claims)
	for i := range recs {
		c := &hooklinev1.IdempotencyRecord{TenantId: "acme", IdempotencyKey: fmt.Sprint("order-", i), ClaimId: ids.New("clm_", now),
			State: hooklinev1.IdempotencyState_IDEMPOTENCY_STATE_CLAIMED, RequestHash: make([]byte, 32), EventId: ids.New(ids.Event, now),
			InstanceId: "ingest-1", CreatedAt: timestamppb.New(now), ExpiresAt: timestamppb.New(now.Add(24 * time.Hour))}
		for range endpoints {
			c.Deliveries = append(c.Deliveries, &hooklinev1.DeliveryRef{DeliveryId: ids.New(ids.Delivery, now), EndpointId: ids.New(ids.Endpoint, now)})
		}
		b, err := proto.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		recs[i] = &kgo.Record{Topic: "idempotency", Key: []byte(RecordKey("acme", c.GetIdempotencyKey())), Value: b, Offset: int64(i)}
	}
	v := NewView(func() time.Time { return now }, 24*time.Hour)
	before := liveHeap()
	for _, r := range recs {
		v.Apply(r)
	}
	retained := (liveHeap() - before) / claims
	runtime.KeepAlive(recs) // in both readings: what grew is the view's
	runtime.KeepAlive(v)
	t.Logf("%d claims of %d endpoints: %d bytes retained per claim (bound %d)", claims, endpoints, retained, bound)
	if retained > bound {
		t.Fatalf("the idempotency view retains %d bytes per claim of %d endpoints, want at most %d: it keeps per-endpoint state for every claim", retained, endpoints, bound)
	}
	if _, ok := v.Winner(RecordKey("acme", "order-7")); !ok {
		t.Fatal("claim order-7 has no winner")
	}
}

// liveHeap is the bytes of live objects after a collection.
func liveHeap() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
