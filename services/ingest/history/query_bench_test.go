package history

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/sdk/ids"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// BenchmarkListDeliveriesPage measures one page of 100 from the index
// (no Kafka wait), over the filter mixes of bench/historybench, with
// HISTORY_BENCH_DELIVERIES deliveries (default 20,000; the index is built
// first, untimed, in HISTORY_BENCH_DIR if set and kept there for the next
// run) and the default 32 MiB block cache.
func BenchmarkListDeliveriesPage(b *testing.B) {
	n := 20000
	if v, err := strconv.Atoi(os.Getenv("HISTORY_BENCH_DELIVERIES")); err == nil {
		n = v
	}
	dir := os.Getenv("HISTORY_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	first := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := Open(dir, testTopics)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if off, _ := s.Offsets(); off[testTopics.Results][0] < int64(2*n) {
		fillForBench(b, s, first, n)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	span := time.Duration(n) * 50 * time.Millisecond
	b.ResetTimer()
	for range b.N {
		i := rnd.IntN(1 << 20)
		from := first.Add(time.Duration(rnd.Int64N(int64(span))))
		fs := []Filter{
			{EndpointID: fmt.Sprintf("ep_bench%02d", i%20)},
			{EndpointID: fmt.Sprintf("ep_bench%02d", i%20), State: hooklinev1.DeliveryState_DELIVERY_STATE_FAILED},
			{EventType: fmt.Sprintf("order.step%d", i%10), Since: from},
			{Since: from, Until: from.Add(time.Hour)},
			{State: hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, Since: from},
		}
		if _, err := s.Reader().Deliveries("bench", fs[i%len(fs)], "", 100); err != nil {
			b.Fatal(err)
		}
	}
}

// fillForBench indexes n deliveries as bench/historybench writes them
// (2 KB payloads, 20 endpoints, 10 types, every seventh FAILED).
func fillForBench(b *testing.B, s *Store, first time.Time, n int) {
	payload := make([]byte, 2048)
	var recs []*kgo.Record
	for i := range n {
		at := first.Add(time.Duration(i) * 50 * time.Millisecond)
		d := &hooklinev1.Delivery{DeliveryId: ids.New(ids.Delivery, at), EventId: ids.New(ids.Event, at), TenantId: "bench",
			EndpointId: fmt.Sprintf("ep_bench%02d", i%20), EventType: fmt.Sprintf("order.step%d", i%10), Payload: payload, CreatedAt: timestamppb.New(at)}
		state := hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED
		if i%7 == 0 {
			state = hooklinev1.DeliveryState_DELIVERY_STATE_FAILED
		}
		res := &hooklinev1.AttemptResult{DeliveryId: d.GetDeliveryId(), EventId: d.GetEventId(), TenantId: "bench", EndpointId: d.GetEndpointId(),
			EventType: d.GetEventType(), Attempt: 1, State: state, StartedAt: timestamppb.New(at.Add(time.Second))}
		dr, _ := hkafka.Record(testTopics.Deliveries, "k", d)
		rr, _ := hkafka.Record(testTopics.Results, "k", res)
		dr.Offset, rr.Offset = int64(i), int64(i)
		recs = append(recs, dr, rr)
		if len(recs) >= 1000 || i == n-1 {
			if err := s.Writer().Apply(recs, hkafka.Offsets{testTopics.Results: {0: int64(2 * (i + 1))}}); err != nil {
				b.Fatal(err)
			}
			recs = recs[:0]
		}
	}
	if err := s.db.Flush(); err != nil {
		b.Fatal(err)
	}
}
