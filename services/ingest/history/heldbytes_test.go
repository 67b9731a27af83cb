package history

import (
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/sdk/ids"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestUnendedBytesFollowEachDeliveryToItsEnd: an endpoint's unended bytes
// count a delivery's payload from its first record until its terminal
// result; a hold by reference (no payload), a parked result and a batch
// applied twice change nothing; a result read before its delivery
// record is counted when the record comes; a recovered delivery counts
// again until it ends again; the sweep uncounts what it deletes
// unended; the applied offsets come from the same state.
func TestUnendedBytesFollowEachDeliveryToItsEnd(t *testing.T) {
	s := openTest(t)
	now := time.Now()
	var off int64
	rec := func(topic string, m proto.Message) *kgo.Record {
		r, err := hkafka.Record(topic, "ep_1", m)
		if err != nil {
			t.Fatal(err)
		}
		r.Offset = off
		off++
		return r
	}
	delivery := func(id string, payload int) *kgo.Record {
		return rec(testTopics.Deliveries, &hooklinev1.Delivery{DeliveryId: id, EventId: "evt_" + id, TenantId: "t", EndpointId: "ep_1",
			EventType: "a.b", Payload: make([]byte, payload), CreatedAt: timestamppb.New(now)})
	}
	result := func(id string, st hooklinev1.DeliveryState) *kgo.Record {
		return rec(testTopics.Results, &hooklinev1.AttemptResult{DeliveryId: id, EventId: "evt_" + id, TenantId: "t", EndpointId: "ep_1", State: st, Attempt: 1})
	}
	apply := func(recs ...*kgo.Record) {
		t.Helper()
		next := hkafka.Offsets{}
		for _, r := range recs {
			if next[r.Topic] == nil {
				next[r.Topic] = map[int32]int64{}
			}
			next[r.Topic][0] = r.Offset + 1
		}
		if err := s.Writer().Apply(recs, next); err != nil {
			t.Fatal(err)
		}
	}
	want := func(what string, n int64) {
		t.Helper()
		got, applied, err := s.Reader().Unended("t", []string{"ep_1", "ep_2"})
		if err != nil {
			t.Fatal(err)
		}
		if got["ep_1"] != n || got["ep_2"] != 0 {
			t.Fatalf("%s: unended bytes %v, want ep_1: %d", what, got, n)
		}
		if applied[0] == 0 {
			t.Fatalf("%s: applied offsets %v, want the deliveries topic's", what, applied)
		}
	}
	a, b, c := ids.New(ids.Delivery, now), ids.New(ids.Delivery, now), ids.New(ids.Delivery, now)
	first := delivery(a, 100)
	apply(first, delivery(b, 30))
	want("two published", 130)
	apply(first)
	want("a batch applied again", 130)
	apply(result(a, hooklinev1.DeliveryState_DELIVERY_STATE_PARKED), delivery(a, 0))
	want("parked, held by reference", 130)
	apply(result(a, hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED))
	want("one delivered", 30)
	apply(result(c, hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED))
	want("a result before its delivery", 30)
	apply(delivery(c, 7))
	want("its delivery read", 37)
	apply(result(b, hooklinev1.DeliveryState_DELIVERY_STATE_EXPIRED), result(b, hooklinev1.DeliveryState_DELIVERY_STATE_EXPIRED))
	want("one expired", 7)
	apply(delivery(b, 30), result(b, hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED))
	want("the expired one recovered, unended again", 37)
	apply(result(b, hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED))
	want("the recovered one delivered", 7)
	if _, _, err := s.Writer().Sweep(now.Add(time.Hour), now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	want("swept", 0)
}
