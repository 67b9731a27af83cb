package idempotency

import (
	"bytes"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/sdk/ids"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestAClaimAnswersTheSameDeliveriesInEveryForm: a claim with
// endpoint_ids answers delivery ids derived from its event and each
// endpoint, the same every time it is read; a claim written before
// endpoint_ids answers the refs it carries; both match the request by
// its hash, and an ingest from before (which compares the bare hash)
// refuses a repeat of the new form rather than answer it without
// deliveries.
func TestAClaimAnswersTheSameDeliveriesInEveryForm(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	hash := RequestHash(&hooklinev1.PublishEventRequest{EventType: "a.b", Payload: []byte(`{}`)})
	newForm := &hooklinev1.IdempotencyRecord{ClaimId: "clm_1", EventId: "evt_1", CreatedAt: timestamppb.New(at),
		RequestHash: append([]byte{HashVersion}, hash...), EndpointIds: []string{"ep_1", "ep_2"}}
	b, err := proto.Marshal(newForm)
	if err != nil {
		t.Fatal(err)
	}
	var readBack hooklinev1.IdempotencyRecord
	if err := proto.Unmarshal(b, &readBack); err != nil {
		t.Fatal(err)
	}
	a, c := claimResponse(newForm), claimResponse(&readBack)
	if !proto.Equal(a, c) || len(a.GetDeliveries()) != 2 || a.GetDeliveries()[1].GetEndpointId() != "ep_2" ||
		a.GetDeliveries()[0].GetDeliveryId() == a.GetDeliveries()[1].GetDeliveryId() {
		t.Fatalf("answers %v and %v, want the same two deliveries", a, c)
	}
	if id := a.GetDeliveries()[0].GetDeliveryId(); id != ids.Derive(ids.Delivery, at, "evt_1", "ep_1") {
		t.Fatalf("delivery id %s is not derived from the event and the endpoint", id)
	}
	old := &hooklinev1.IdempotencyRecord{ClaimId: "clm_0", EventId: "evt_0", RequestHash: hash,
		Deliveries: []*hooklinev1.DeliveryRef{{DeliveryId: "dlv_kept", EndpointId: "ep_1"}}}
	if got := claimResponse(old).GetDeliveries(); len(got) != 1 || got[0].GetDeliveryId() != "dlv_kept" {
		t.Fatalf("a claim from before endpoint_ids answered %v, want its own refs", got)
	}
	if !SameRequest(newForm.GetRequestHash(), hash) || !SameRequest(old.GetRequestHash(), hash) {
		t.Fatal("the request does not match its claim's hash")
	}
	if bytes.Equal(newForm.GetRequestHash(), hash) {
		t.Fatal("an ingest from before would take a new claim's hash for its request")
	}
}
