package history

import (
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/sdk/batch"
	"github.com/hookline/hookline/sdk/ids"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestABatchRecordIsNotADeliveryAndItsMembersKeepTheBatchOfEachAttempt:
// a batch's record on the deliveries topic (a retry the scheduler
// released) is not indexed as a delivery of its own: its id answers
// nothing, lists hold the members only. Each member's results carry the
// batch's id and size through the slim format (which strips the ids the
// summary holds), and come back on the member's attempts.
func TestABatchRecordIsNotADeliveryAndItsMembersKeepTheBatchOfEachAttempt(t *testing.T) {
	s := openTest(t)
	now := time.Now()
	var members []*hooklinev1.Delivery
	var memberIDs []string
	for i := range 2 {
		at := now.Add(time.Duration(i) * time.Millisecond)
		members = append(members, &hooklinev1.Delivery{DeliveryId: ids.New(ids.Delivery, at), EventId: ids.New(ids.Event, at), TenantId: "t",
			EndpointId: "ep_1", EventType: "a.b", Attempt: 1, CreatedAt: timestamppb.New(at)})
		memberIDs = append(memberIDs, members[i].GetDeliveryId())
	}
	batchID := batch.ID(memberIDs)
	batchRecord := &hooklinev1.Delivery{DeliveryId: batchID, EventId: batchID, TenantId: "t", EndpointId: "ep_1", EventType: "a.b",
		Payload: []byte(`{"type":"batch","data":[]}`), Attempt: 2, CreatedAt: timestamppb.New(now), Batch: &hooklinev1.Batch{Members: members}}
	result := func(m *hooklinev1.Delivery, attempt uint32, state hooklinev1.DeliveryState) rec {
		return rec{testTopics.Results, &hooklinev1.AttemptResult{DeliveryId: m.GetDeliveryId(), EventId: m.GetEventId(), TenantId: "t",
			EndpointId: "ep_1", EventType: "a.b", Attempt: attempt, State: state, StatusCode: 200, BatchId: batchID, BatchSize: 2}}
	}
	var give []rec
	for _, m := range members {
		withPayload := proto.Clone(m).(*hooklinev1.Delivery)
		withPayload.Payload = []byte(`{"n":1}`)
		give = append(give, rec{testTopics.Deliveries, withPayload})
	}
	give = append(give,
		result(members[0], 1, hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED),
		result(members[1], 1, hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED),
		rec{testTopics.Deliveries, batchRecord},
		rec{testTopics.Dead, &hooklinev1.DeadLetter{Delivery: batchRecord}},
		result(members[0], 2, hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED),
		result(members[1], 2, hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED),
	)
	applyAll(t, s, give...)

	if _, _, _, ok, err := s.Reader().Delivery("t", batchID); ok || err != nil {
		t.Fatalf("the batch's record was indexed as a delivery (%v)", err)
	}
	page, err := s.Reader().Deliveries("t", Filter{EndpointID: "ep_1"}, "", 10)
	if err != nil || len(page.Items) != 2 {
		t.Fatalf("listed %d deliveries (%v), want the 2 members only", len(page.Items), err)
	}
	for _, m := range members {
		st, attempts, _, ok, err := s.Reader().Delivery("t", m.GetDeliveryId())
		if err != nil || !ok {
			t.Fatalf("member %s not indexed: %v", m.GetDeliveryId(), err)
		}
		if st.GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED || st.GetAttempts() != 2 || len(attempts) != 2 {
			t.Fatalf("member %s: status %v with %d attempts, want delivered after 2", m.GetDeliveryId(), st, len(attempts))
		}
		for _, a := range attempts {
			if a.GetBatchId() != batchID || a.GetBatchSize() != 2 || a.GetDeliveryId() != m.GetDeliveryId() {
				t.Fatalf("attempt %d of %s reads batch %q size %d delivery %q, want batch %s of 2", a.GetAttempt(), m.GetDeliveryId(), a.GetBatchId(), a.GetBatchSize(), a.GetDeliveryId(), batchID)
			}
		}
	}
}
