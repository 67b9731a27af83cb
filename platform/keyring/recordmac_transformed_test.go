package keyring

import (
	"testing"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/protobuf/proto"
)

func TestDeliveryMACCoversTransformation(t *testing.T) {
	key, err := newRecordMACKey([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	base := &hooklinev1.Delivery{DeliveryId: "dlv_1", EventId: "evt_1", TenantId: "t", EndpointId: "ep_1", EventType: "a.b", Payload: []byte("{}")}
	sum := PayloadSum(base.GetPayload())
	withT := proto.Clone(base).(*hooklinev1.Delivery)
	withT.Transformed = &hooklinev1.Transformed{Url: "https://a.example/", Method: "PUT", Headers: map[string]string{"x-a": "1", "x-b": "2"}}
	macOf := func(d *hooklinev1.Delivery) string { return string(deliveryMAC(key, d, sum)) }
	if macOf(base) == macOf(withT) {
		t.Fatal("a transformation does not change the MAC")
	}
	for name, change := range map[string]func(*hooklinev1.Transformed){
		"url":       func(x *hooklinev1.Transformed) { x.Url = "https://evil.example/" },
		"method":    func(x *hooklinev1.Transformed) { x.Method = "PATCH" },
		"header":    func(x *hooklinev1.Transformed) { x.Headers["x-a"] = "2" },
		"cancelled": func(x *hooklinev1.Transformed) { x.Cancelled = true },
		"error":     func(x *hooklinev1.Transformed) { x.Error = "boom" },
	} {
		d := proto.Clone(withT).(*hooklinev1.Delivery)
		change(d.Transformed)
		if macOf(d) == macOf(withT) {
			t.Errorf("changing the transformation's %s keeps the MAC", name)
		}
	}
}
