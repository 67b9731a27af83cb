package ingest

import (
	"strings"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/keyring"
	"google.golang.org/protobuf/proto"
)

// TestTransformDeliveryMarksTheRecord: at fan-out a cancelling handler
// marks the delivery cancelled, a throwing one marks it with the error,
// and either leaves the payload as published; a successful one carries
// the transformed body and event type and the method and headers its
// attempts use, all covered by the record's MAC; no script leaves the
// record untouched. Each tenant's scripts are compiled in its own part
// of the cache.
func TestTransformDeliveryMarksTheRecord(t *testing.T) {
	s := tryService(t)
	keys, err := keyring.Parse([]byte(keyring.NewKeyLine(time.Unix(0, 0))))
	if err != nil {
		t.Fatal(err)
	}
	ep := func(tenant, src string) *hooklinev1.Endpoint {
		return &hooklinev1.Endpoint{Id: "ep_1", TenantId: tenant, Url: "https://rx.example/hooks", Transformation: src}
	}
	delivery := func() *hooklinev1.Delivery {
		return &hooklinev1.Delivery{DeliveryId: "dlv_1", EventId: "evt_1", TenantId: "t", EndpointId: "ep_1", EventType: "invoice.paid", Payload: []byte(`{"amount": 15}`)}
	}

	d := delivery()
	s.content.transformDelivery(t.Context(), ep("t", ""), d)
	if d.GetTransformed() != nil || string(d.GetPayload()) != `{"amount": 15}` {
		t.Fatalf("no script: %v; want the record untouched", d)
	}

	d = delivery()
	s.content.transformDelivery(t.Context(), ep("t", `function handler(w) { return {cancel: w.payload.amount < 100} }`), d)
	if !d.GetTransformed().GetCancelled() || d.GetTransformed().GetError() != "" || string(d.GetPayload()) != `{"amount": 15}` {
		t.Fatalf("cancel: %v; want marked cancelled, payload as published", d)
	}

	d = delivery()
	s.content.transformDelivery(t.Context(), ep("t", `function handler(w) { throw new Error("no customer") }`), d)
	if e := d.GetTransformed().GetError(); !strings.Contains(e, "no customer") || d.GetTransformed().GetCancelled() || string(d.GetPayload()) != `{"amount": 15}` {
		t.Fatalf("throw: %v; want marked with the error, payload as published", d)
	}

	d = delivery()
	s.content.transformDelivery(t.Context(), ep("t", `function handler(w) {
		w.payload = {text: "paid " + w.payload.amount}; w.eventType = "slack.message"; w.method = "PATCH"; w.headers["X-Team"] = "billing"; return w }`), d)
	tr := d.GetTransformed()
	if string(d.GetPayload()) != `{"text":"paid 15"}` || d.GetEventType() != "slack.message" || tr.GetMethod() != "PATCH" || tr.GetHeaders()["X-Team"] != "billing" || tr.GetUrl() != "" || tr.GetError() != "" || tr.GetCancelled() {
		t.Fatalf("success: %v; want the transformed body, type, method and header, the url unchanged", d)
	}
	var a recordAuthenticator
	a.authenticate(keys, d)
	if err := keys.VerifyDelivery(d); err != nil {
		t.Fatalf("the transformed record does not verify: %v", err)
	}
	for name, alter := range map[string]func(*hooklinev1.Transformed){
		"method": func(x *hooklinev1.Transformed) { x.Method = "PUT" },
		"header": func(x *hooklinev1.Transformed) { x.Headers["X-Team"] = "ops" },
		"url":    func(x *hooklinev1.Transformed) { x.Url = "https://evil.example/" },
	} {
		altered := proto.Clone(d).(*hooklinev1.Delivery)
		alter(altered.Transformed)
		if err := keys.VerifyDelivery(altered); err == nil {
			t.Errorf("a record whose %s was altered after the MAC still verifies", name)
		}
	}

	before := s.content.transforms.Len()
	s.content.transformDelivery(t.Context(), ep("other", `function handler(w) { throw new Error("no customer") }`), delivery())
	if s.content.transforms.Len() != before+1 {
		t.Fatalf("another tenant's copy of a script shared a program (%d programs, want %d)", s.content.transforms.Len(), before+1)
	}
}
