package history

import (
	"fmt"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/sdk/ids"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// BenchmarkApply measures indexing a delivery and its result (two
// records, 2 KB payload), in polls of 500 records; at fan-out 10 every
// 10 deliveries in a row are one event's (as a publish writes them).
func BenchmarkApply(b *testing.B) {
	for _, fanout := range []int{1, 10} {
		b.Run(fmt.Sprintf("fanout=%d", fanout), func(b *testing.B) { benchmarkApply(b, fanout) })
	}
}

func benchmarkApply(b *testing.B, fanout int) {
	s, err := Open(b.TempDir(), testTopics)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var batchBytes int
	s.writer.committed = func(n int, _ hkafka.Offsets) { batchBytes += n }
	payload := make([]byte, 2048)
	now := time.Now()
	var recs []*kgo.Record
	var off int64
	var eventID string
	b.ResetTimer()
	for i := range b.N {
		at := now.Add(time.Duration(i) * time.Millisecond)
		if i%fanout == 0 {
			eventID = ids.New(ids.Event, at)
		}
		d := &hooklinev1.Delivery{DeliveryId: ids.New(ids.Delivery, at), EventId: eventID, TenantId: "t",
			EndpointId: fmt.Sprint("ep_", i%20), EventType: "a.b", Payload: payload, CreatedAt: timestamppb.New(at)}
		res := &hooklinev1.AttemptResult{DeliveryId: d.GetDeliveryId(), EventId: d.GetEventId(), TenantId: "t", EndpointId: d.GetEndpointId(),
			EventType: "a.b", Attempt: 1, State: hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED, StartedAt: timestamppb.New(at)}
		for _, r := range []struct {
			topic string
			m     interface{}
		}{{testTopics.Deliveries, d}, {testTopics.Results, res}} {
			var kr *kgo.Record
			switch m := r.m.(type) {
			case *hooklinev1.Delivery:
				kr, _ = hkafka.Record(r.topic, "k", m)
			case *hooklinev1.AttemptResult:
				kr, _ = hkafka.Record(r.topic, "k", m)
			}
			kr.Offset = off
			off++
			recs = append(recs, kr)
		}
		if len(recs) >= 500 || i == b.N-1 {
			if err := s.Writer().Apply(recs, hkafka.Offsets{testTopics.Results: {0: off}}); err != nil {
				b.Fatal(err)
			}
			recs = recs[:0]
		}
	}
	b.ReportMetric(float64(2*b.N)/b.Elapsed().Seconds(), "records/s")
	// What the index writes per delivery, the lever on its compactions'
	// CPU: the batches' bytes, and what Pebble's flushes and compactions
	// wrote of them (compactions run in the background, so the last
	// figure lags a little at the end of a run).
	m := s.db.Metrics().Total()
	b.ReportMetric(float64(batchBytes)/float64(b.N), "batch-B/dlv")
	b.ReportMetric(float64(m.TableBytesFlushed)/float64(b.N), "flushed-B/dlv")
	b.ReportMetric(float64(m.TableBytesCompacted)/float64(b.N), "compacted-B/dlv")
}
