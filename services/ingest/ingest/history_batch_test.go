package ingest

import (
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/sdk/batch"
	"github.com/hookline/hookline/sdk/ids"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestGetDeliveryShowsEachMembersBatchAttempts: two deliveries sent as a
// batch and retried (the batch's record released onto the deliveries
// topic) are listed as two deliveries, not three, and GetDelivery of
// each answers its attempts with the batch's id and size.
func TestGetDeliveryShowsEachMembersBatchAttempts(t *testing.T) {
	r := newHistoryRig(t)
	api, _ := r.start()
	opts, err := r.kafka.Opts()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	produce := func(topic string, m proto.Message) {
		rec, err := hkafka.Record(topic, "ep_a", m)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	now := time.Now().Add(-time.Minute)
	var members []*hooklinev1.Delivery
	var memberIDs []string
	for i := range 2 {
		at := now.Add(time.Duration(i) * time.Millisecond)
		d := &hooklinev1.Delivery{DeliveryId: ids.New(ids.Delivery, at), EventId: ids.New(ids.Event, at), TenantId: "acme",
			EndpointId: "ep_a", EventType: "invoice.paid", Payload: []byte(`{"n":1}`), Attempt: 1, CreatedAt: timestamppb.New(at)}
		produce(r.topics.Deliveries, d)
		members = append(members, d)
		memberIDs = append(memberIDs, d.GetDeliveryId())
	}
	batchID := batch.ID(memberIDs)
	result := func(m *hooklinev1.Delivery, attempt uint32, state hooklinev1.DeliveryState, code int32) *hooklinev1.AttemptResult {
		return &hooklinev1.AttemptResult{DeliveryId: m.GetDeliveryId(), EventId: m.GetEventId(), TenantId: "acme", EndpointId: "ep_a",
			EventType: "invoice.paid", Attempt: attempt, State: state, StatusCode: code, BatchId: batchID, BatchSize: 2,
			StartedAt: timestamppb.New(now.Add(time.Duration(attempt) * time.Second))}
	}
	for _, m := range members {
		produce(r.topics.Results, result(m, 1, hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED, 503))
	}
	produce(r.topics.Deliveries, &hooklinev1.Delivery{DeliveryId: batchID, EventId: batchID, TenantId: "acme", EndpointId: "ep_a",
		EventType: "invoice.paid", Payload: []byte(`{"type":"batch","data":[]}`), Attempt: 2, CreatedAt: timestamppb.New(now),
		Batch: &hooklinev1.Batch{Members: members}})
	for _, m := range members {
		produce(r.topics.Results, result(m, 2, hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED, 200))
	}
	if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	list, err := api.ListDeliveries(r.ctx(), &hooklinev1.ListDeliveriesRequest{EndpointId: "ep_a"})
	if err != nil || len(list.GetDeliveries()) != 2 {
		t.Fatalf("ListDeliveries: %v, %d deliveries; want the 2 members", err, len(list.GetDeliveries()))
	}
	for _, m := range members {
		got, err := api.GetDelivery(r.ctx(), &hooklinev1.GetDeliveryRequest{DeliveryId: m.GetDeliveryId()})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.GetAttempts()) != 2 || got.GetDelivery().GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED {
			t.Fatalf("member %s: %v", m.GetDeliveryId(), got)
		}
		for _, a := range got.GetAttempts() {
			if a.GetBatchId() != batchID || a.GetBatchSize() != 2 {
				t.Fatalf("attempt %d of %s answered batch %q size %d, want %s of 2", a.GetAttempt(), m.GetDeliveryId(), a.GetBatchId(), a.GetBatchSize(), batchID)
			}
		}
	}
}
