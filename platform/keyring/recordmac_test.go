package keyring

import (
	"errors"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestDeliveryMACCoversWhatIsSentAndSurvivesRotation: a delivery record's
// MAC verifies after the changes later hops make (attempt, due time,
// kind, holds) and fails when anything the dispatcher signs and sends is
// changed; a key ring with the old key still in it verifies records made
// before a rotation, one without it refuses them; a plaintext ring makes
// none.
func TestDeliveryMACCoversWhatIsSentAndSurvivesRotation(t *testing.T) {
	oldLine, newLine := NewKeyLine(time.Unix(0, 0)), NewKeyLine(time.Unix(1, 0))
	ring := func(lines ...string) *Keyring {
		var b []byte
		for _, l := range lines {
			b = append(b, l+"\n"...)
		}
		k, err := Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	before, during, after := ring(oldLine), ring(newLine, oldLine), ring(newLine)
	d := &hooklinev1.Delivery{DeliveryId: "dlv_1", EventId: "evt_1", TenantId: "t", EndpointId: "ep_1", EventType: "a.b", Payload: []byte(`{"n":1}`), Attempt: 1}
	before.AuthenticateDelivery(d, PayloadSum(d.GetPayload()))
	if err := before.VerifyDelivery(d); err != nil {
		t.Fatalf("a record verifies under the key that made it: %v", err)
	}
	hop := proto.Clone(d).(*hooklinev1.Delivery)
	hop.Attempt, hop.DueAt, hop.HeldSince, hop.Kind = 4, timestamppb.Now(), timestamppb.Now(), hooklinev1.DeliveryKind_DELIVERY_KIND_DEFERRED
	if err := before.VerifyDelivery(hop); err != nil {
		t.Fatalf("a retry hop's changes broke the MAC: %v", err)
	}
	for name, change := range map[string]func(*hooklinev1.Delivery){
		"delivery id": func(d *hooklinev1.Delivery) { d.DeliveryId = "dlv_2" },
		"event id":    func(d *hooklinev1.Delivery) { d.EventId = "evt_2" },
		"tenant":      func(d *hooklinev1.Delivery) { d.TenantId = "u" },
		"endpoint":    func(d *hooklinev1.Delivery) { d.EndpointId = "ep_2" },
		"event type":  func(d *hooklinev1.Delivery) { d.EventType = "a.c" },
		"payload":     func(d *hooklinev1.Delivery) { d.Payload = []byte(`{"n":2}`) },
		// Field boundaries are part of the MAC: moving a byte from one
		// field to the next is a change.
		"boundary": func(d *hooklinev1.Delivery) { d.DeliveryId, d.EventId = "dlv_1e", "vt_1" },
	} {
		c := proto.Clone(d).(*hooklinev1.Delivery)
		change(c)
		if err := before.VerifyDelivery(c); !errors.Is(err, ErrBadMAC) {
			t.Errorf("%s changed: %v, want ErrBadMAC", name, err)
		}
	}
	unsigned := proto.Clone(d).(*hooklinev1.Delivery)
	unsigned.RecordMac = nil
	if err := before.VerifyDelivery(unsigned); !errors.Is(err, ErrUnsigned) {
		t.Errorf("no MAC: %v, want ErrUnsigned", err)
	}

	// Rotation: with the old key still in the file, its records verify;
	// new ones are made under the new key.
	if err := during.VerifyDelivery(d); err != nil {
		t.Fatalf("during a rotation a record under the old key: %v", err)
	}
	fresh := proto.Clone(d).(*hooklinev1.Delivery)
	during.AuthenticateDelivery(fresh, PayloadSum(fresh.GetPayload()))
	if fresh.GetRecordMac().GetKeyId() != during.Current() || after.VerifyDelivery(fresh) != nil {
		t.Fatalf("a record made during the rotation: %v, want it under the new key %q", fresh.GetRecordMac(), during.Current())
	}
	if err := after.VerifyDelivery(d); !errors.Is(err, ErrBadMAC) {
		t.Fatalf("the old key removed, a record under it: %v, want ErrBadMAC", err)
	}

	p := Plaintext()
	plain := proto.Clone(unsigned).(*hooklinev1.Delivery)
	p.AuthenticateDelivery(plain, PayloadSum(plain.GetPayload()))
	if p.AuthenticatesDeliveries() || plain.GetRecordMac() != nil {
		t.Fatal("a plaintext key ring made a MAC")
	}
}
