package keyring

import (
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
)

// BenchmarkAuthenticateDelivery makes one delivery record's MAC (the
// payload's sum made once, as a fan-out does).
func BenchmarkAuthenticateDelivery(b *testing.B) {
	k, err := Parse([]byte(NewKeyLine(time.Unix(0, 0)) + "\n"))
	if err != nil {
		b.Fatal(err)
	}
	d := &hooklinev1.Delivery{DeliveryId: "dlv_01HZX3", EventId: "evt_01HZX3", TenantId: "acme", EndpointId: "ep_01HZX3", EventType: "invoice.paid", Payload: make([]byte, 512)}
	sum := PayloadSum(d.GetPayload())
	b.ReportAllocs()
	for b.Loop() {
		k.AuthenticateDelivery(d, sum)
	}
}
