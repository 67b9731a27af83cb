package dispatcher

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/keyring"
	"github.com/hookline/hookline/sdk/sign"
	"google.golang.org/protobuf/proto"
)

// TestOnlyDeliveryRecordsWithIngestsMACAreSigned: a record ingest
// authenticated is sent, and its retry record carries the same MAC and
// verifies again (the retry path and the scheduler pass it through); a
// record without a MAC, with its payload or event type altered, or with a
// MAC under a key the key file does not hold is FAILED, dead-lettered and
// not sent. With --accept-unsigned-deliveries (an upgrade's window) a
// record without a MAC is sent, but an altered one is still refused.
func TestOnlyDeliveryRecordsWithIngestsMACAreSigned(t *testing.T) {
	var requests atomic.Int32
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable) // transient: a retry record follows
	}))
	defer rx.Close()
	mac := func(d *hooklinev1.Delivery) *hooklinev1.Delivery {
		testKeys.AuthenticateDelivery(d, keyring.PayloadSum(d.GetPayload()))
		return d
	}
	base := func() *hooklinev1.Delivery {
		return &hooklinev1.Delivery{DeliveryId: "dlv_1", EventId: "evt_1", TenantId: "t", EndpointId: "ep_1", EventType: "a.b", Payload: []byte(`{"n":1}`), Attempt: 1}
	}
	altered := func(change func(d *hooklinev1.Delivery)) *hooklinev1.Delivery {
		d := mac(base())
		change(d)
		return d
	}
	tests := []struct {
		name           string
		give           *hooklinev1.Delivery
		acceptUnsigned bool
		sent           bool
	}{
		{"with ingest's MAC", mac(base()), false, true},
		{"without a MAC", base(), false, false},
		{"payload altered", altered(func(d *hooklinev1.Delivery) { d.Payload = []byte(`{"n":2}`) }), false, false},
		{"event type altered", altered(func(d *hooklinev1.Delivery) { d.EventType = "a.c" }), false, false},
		{"delivery id altered", altered(func(d *hooklinev1.Delivery) { d.DeliveryId = "dlv_2" }), false, false},
		{"unknown key", altered(func(d *hooklinev1.Delivery) { d.RecordMac.KeyId = "k-other" }), false, false},
		{"attempt and due time are not covered", altered(func(d *hooklinev1.Delivery) { d.Attempt = 3 }), false, true},
		{"without a MAC, accepting unsigned", base(), true, true},
		{"altered, accepting unsigned", altered(func(d *hooklinev1.Delivery) { d.Payload = []byte(`{"n":2}`) }), true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			requests.Store(0)
			s := newTestService(t)
			s.cfg.AcceptUnsigned = tt.acceptUnsigned
			s.store.Put(endpoint(rx.URL, sign.GenerateSecret()))
			r, err := hkafka.Record(s.topics.Deliveries, "ep_1", tt.give)
			if err != nil {
				t.Fatal(err)
			}
			out := s.handler.handleSafely(t.Context(), r)
			var res hooklinev1.AttemptResult
			var retry *hooklinev1.Delivery
			dead := false
			for _, o := range out {
				switch o.Topic {
				case s.topics.Results:
					if err := proto.Unmarshal(o.Value, &res); err != nil {
						t.Fatal(err)
					}
				case s.topics.Retries:
					retry = &hooklinev1.Delivery{}
					if err := proto.Unmarshal(o.Value, retry); err != nil {
						t.Fatal(err)
					}
				case s.topics.Dead:
					dead = true
				}
			}
			if got := requests.Load() == 1; got != tt.sent {
				t.Fatalf("sent %v (%d requests), want %v; result %v", got, requests.Load(), tt.sent, &res)
			}
			if !tt.sent {
				if res.GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_FAILED || !strings.Contains(res.GetReason(), "not authenticated") || !dead {
					t.Fatalf("want a FAILED result saying not authenticated and a dead letter, got %v (dead letter: %v)", &res, dead)
				}
				return
			}
			if tt.give.GetRecordMac() == nil {
				return
			}
			if retry == nil || !proto.Equal(retry.GetRecordMac(), tt.give.GetRecordMac()) || testKeys.VerifyDelivery(retry) != nil {
				t.Fatalf("the retry record %v does not carry a verifying MAC", retry)
			}
		})
	}
}
