package scheduler

import (
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/config"
	hkafka "github.com/hookline/hookline/platform/kafka"
)

// TestASetAsideBatchEndsEachMember: a batch whose release can never be
// written (issue 30) ends every member FAILED, one result and one dead
// letter each — not one under the batch's id, which would leave its
// members without a terminal result (make sim seed 12: 4 lost).
func TestASetAsideBatchEndsEachMember(t *testing.T) {
	cfg, err := config.Defaults[Config]()
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d := &hooklinev1.Delivery{
		DeliveryId: "bat_1", EventId: "bat_1", TenantId: "t", EndpointId: "ep_1", EventType: "batch", Attempt: 2,
		Payload: []byte(`{"type":"batch","data":[]}`),
		Batch: &hooklinev1.Batch{Members: []*hooklinev1.Delivery{
			{DeliveryId: "dlv_1", EventId: "evt_1", TenantId: "t", EndpointId: "ep_1", EventType: "a"},
			{DeliveryId: "dlv_2", EventId: "evt_2", TenantId: "t", EndpointId: "ep_1", EventType: "b"},
		}},
	}
	out := s.setAside(d, "refused", time.Now())
	ended := map[string]int{}
	for _, r := range out {
		switch r.Topic {
		case s.topics.Results:
			var res hooklinev1.AttemptResult
			if err := hkafka.Decode(r, &res); err != nil {
				t.Fatal(err)
			}
			if res.GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_FAILED || res.GetBatchId() != "bat_1" {
				t.Fatalf("result %v: want FAILED naming the batch", &res)
			}
			ended[res.GetDeliveryId()]++
		case s.topics.Dead:
			var dl hooklinev1.DeadLetter
			if err := hkafka.Decode(r, &dl); err != nil {
				t.Fatal(err)
			}
			ended[dl.GetDelivery().GetDeliveryId()] += 10
		}
	}
	if len(ended) != 2 || ended["dlv_1"] != 11 || ended["dlv_2"] != 11 {
		t.Fatalf("ended %v; want each member one result and one dead letter, the batch none", ended)
	}
}
