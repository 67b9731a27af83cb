package keyring

import (
	"testing"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/protobuf/proto"
)

func TestDeliveryMACCoversABatchsMembers(t *testing.T) {
	key, err := newRecordMACKey([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	macOf := func(d *hooklinev1.Delivery) string { return string(deliveryMAC(key, d, PayloadSum(d.GetPayload()))) }
	d := &hooklinev1.Delivery{
		DeliveryId: "bat_1", EventId: "bat_1", TenantId: "t", EndpointId: "ep_1", Payload: []byte(`{"type":"batch","data":[]}`),
		Batch: &hooklinev1.Batch{Members: []*hooklinev1.Delivery{
			{DeliveryId: "dlv_1", EventId: "evt_1", EventType: "a"},
			{DeliveryId: "dlv_2", EventId: "evt_2", EventType: "b"},
		}},
	}
	if macOf(d) != macOf(proto.Clone(d).(*hooklinev1.Delivery)) {
		t.Fatal("a batch's MAC is not stable")
	}
	for name, change := range map[string]func(*hooklinev1.Delivery){
		"member renamed":   func(d *hooklinev1.Delivery) { d.Batch.Members[1].DeliveryId = "dlv_9" },
		"event renamed":    func(d *hooklinev1.Delivery) { d.Batch.Members[0].EventId = "evt_9" },
		"type changed":     func(d *hooklinev1.Delivery) { d.Batch.Members[0].EventType = "z" },
		"member dropped":   func(d *hooklinev1.Delivery) { d.Batch.Members = d.Batch.Members[:1] },
		"members reversed": func(d *hooklinev1.Delivery) { m := d.Batch.Members; m[0], m[1] = m[1], m[0] },
		"batch removed":    func(d *hooklinev1.Delivery) { d.Batch = nil },
	} {
		c := proto.Clone(d).(*hooklinev1.Delivery)
		change(c)
		if macOf(c) == macOf(d) {
			t.Errorf("%s: the MAC is unchanged", name)
		}
	}
}
