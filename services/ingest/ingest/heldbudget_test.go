package ingest

import (
	"testing"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestHeldBudgetCountsWritesTheIndexHasNotRead: the history index lags
// the log, so the budget adds what this ingest wrote to a paused
// endpoint until the index has applied its partition past the write,
// and what checked publishes reserve until Kafka acknowledges them;
// a failed write gives its reservation back; an unpaused target is
// never checked.
func TestHeldBudgetCountsWritesTheIndexHasNotRead(t *testing.T) {
	index := map[string]int64{}      // what the index counted, by endpoint
	applied := map[int32]int64{0: 0} // the index's applied offsets
	b := &heldBudget{limit: 100, paused: func(string) []string { return []string{"ep_p"} },
		unended: func(string, []string) (map[string]int64, map[int32]int64, error) { return index, applied, nil }}
	ep := func(id string, st hooklinev1.EndpointStatus) *hooklinev1.EndpointRecord {
		return &hooklinev1.EndpointRecord{Endpoint: &hooklinev1.Endpoint{Id: id, Status: st}}
	}
	p, a := ep("ep_p", hooklinev1.EndpointStatus_ENDPOINT_STATUS_PAUSED), ep("ep_a", hooklinev1.EndpointStatus_ENDPOINT_STATUS_ACTIVE)
	// reserve checks a publish in a scope of its own; done ends it.
	type publish struct {
		r    *heldReservation
		done func()
	}
	reserve := func(want codes.Code, payload int, targets ...*hooklinev1.EndpointRecord) publish {
		t.Helper()
		ctx, done := b.scope(t.Context())
		err := b.reserve(ctx, "t", targets, payload)
		if status.Code(err) != want {
			t.Fatalf("reserve %d bytes: %v, want %v", payload, err, want)
		}
		return publish{heldIn(ctx), done}
	}
	if p := reserve(codes.OK, 1000, a); p.r != nil {
		t.Fatal("an unpaused target reserved bytes")
	}
	r1 := reserve(codes.OK, 60, p, a)
	reserve(codes.ResourceExhausted, 50, p) // 60 reserved
	r1.r.acked(&kgo.Record{Key: []byte("ep_a"), Partition: 0, Offset: 4})
	r1.r.acked(&kgo.Record{Key: []byte("ep_p"), Partition: 0, Offset: 5})
	r1.done()
	reserve(codes.ResourceExhausted, 50, p) // 60 written, the index has not read it
	applied[0] = 6
	index["ep_p"] = 60                      // the index read it: counted once
	reserve(codes.ResourceExhausted, 50, p) // still 60
	r2 := reserve(codes.OK, 40, p)
	r2.done()         // not acknowledged: given back
	index["ep_p"] = 0 // delivered
	r3 := reserve(codes.OK, 100, p)
	r3.done()
	if len(b.reserved) != 0 || len(b.written) != 0 {
		t.Fatalf("left reserved %v, written %v", b.reserved, b.written)
	}
}
