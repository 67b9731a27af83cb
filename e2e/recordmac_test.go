package e2e

import (
	"net/http"
	"strings"
	"testing"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/kafkatest"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
)

// TestAForgedDeliveryRecordIsRefusedUnsigned: whoever can write the
// deliveries topic but does not hold the key file cannot make the
// dispatcher sign: a record naming the endpoint's own tenant (which the
// ownership check alone admitted on main, where it was signed and
// delivered) and a copy of a real record with its payload changed are
// each settled FAILED, dead-lettered, and never reach the receiver; the
// real one is delivered.
func TestAForgedDeliveryRecordIsRefusedUnsigned(t *testing.T) {
	st := startStack(t)
	rx := newReceiver(t, http.StatusNoContent)
	ep := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, EventTypes: []string{"forge.*"}}).GetEndpoint().GetId()
	real := st.publish("forge.real", `{"real":true}`)
	legit := kafkatest.Decode(t, st.readN(st.topics.Deliveries, 1), func() *hooklinev1.Delivery { return &hooklinev1.Delivery{} })[0]

	forged := &hooklinev1.Delivery{DeliveryId: "dlv_forged0000000000000000001", EventId: "evt_forged0000000000000000001", TenantId: testTenant,
		EndpointId: ep, EventType: "forge.evil", Payload: []byte(`{"forged":true}`), Attempt: 1, CreatedAt: legit.GetCreatedAt()}
	tampered := proto.Clone(legit).(*hooklinev1.Delivery)
	tampered.DeliveryId, tampered.Payload = "dlv_tampered00000000000000001", []byte(`{"real":false}`)
	var recs []*kgo.Record
	for _, d := range []*hooklinev1.Delivery{forged, tampered} {
		r, err := hkafka.Record(st.topics.Deliveries, ep, d)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	if err := st.client.ProduceSync(st.ctx(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	results := kafkatest.Decode(t, st.readN(st.topics.Results, 3), func() *hooklinev1.AttemptResult { return &hooklinev1.AttemptResult{} })
	for _, res := range results {
		switch res.GetDeliveryId() {
		case real.GetDeliveries()[0].GetDeliveryId():
			if res.GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED {
				t.Errorf("the real delivery: %v, want DELIVERED", res)
			}
		case forged.GetDeliveryId(), tampered.GetDeliveryId():
			if res.GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_FAILED || !strings.Contains(res.GetReason(), "not authenticated") {
				t.Errorf("forged record %s: %v, want FAILED, not authenticated", res.GetDeliveryId(), res)
			}
		default:
			t.Errorf("unexpected result %v", res)
		}
	}
	if n := len(st.readN(st.topics.Dead, 2)); n != 2 {
		t.Errorf("%d dead letters, want the 2 forged records", n)
	}
	for _, p := range rx.got() {
		if !strings.Contains(string(p.body), `"real":true`) {
			t.Errorf("the receiver got a forged body, signed: %s", p.body)
		}
	}
	if n := len(rx.got()); n != 1 {
		t.Errorf("the receiver got %d requests, want the real one only", n)
	}
}
