package ingest

import (
	"testing"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
)

func TestDeliveryIndexStatusFollowsTheLatestResult(t *testing.T) {
	topics := hkafka.Config{TopicPrefix: "x."}.Topics()
	d := &hooklinev1.Delivery{DeliveryId: "dlv_1", EventId: "evt_1", TenantId: "t", EndpointId: "ep_1", EventType: "a.b", Payload: []byte(`{"n":1}`), Attempt: 1}
	result := func(attempt uint32, state hooklinev1.DeliveryState) proto.Message {
		return &hooklinev1.AttemptResult{DeliveryId: "dlv_1", EventId: "evt_1", TenantId: "t", EndpointId: "ep_1", EventType: "a.b", Attempt: attempt, State: state}
	}
	type rec struct {
		topic string
		m     proto.Message
	}
	tests := []struct {
		name         string
		give         []rec
		wantState    hooklinev1.DeliveryState
		wantAttempts uint32
		wantPayload  bool
	}{
		{"published, not attempted", []rec{{topics.Deliveries, d}}, hooklinev1.DeliveryState_DELIVERY_STATE_PENDING, 0, true},
		{"retried then delivered", []rec{{topics.Deliveries, d}, {topics.Results, result(1, hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED)}, {topics.Results, result(2, hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED)}}, hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED, 2, true},
		{"a decision without an attempt counts none", []rec{{topics.Deliveries, d}, {topics.Results, result(0, hooklinev1.DeliveryState_DELIVERY_STATE_PARKED)}}, hooklinev1.DeliveryState_DELIVERY_STATE_PARKED, 0, true},
		{"results only: no payload to resend", []rec{{topics.Results, result(1, hooklinev1.DeliveryState_DELIVERY_STATE_FAILED)}}, hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, 1, false},
		{"the dead letter carries the payload", []rec{{topics.Results, result(1, hooklinev1.DeliveryState_DELIVERY_STATE_FAILED)}, {topics.Dead, &hooklinev1.DeadLetter{Delivery: d}}}, hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newDeliveryIndex(topics)
			for _, r := range tt.give {
				kr, err := hkafka.Record(r.topic, "ep_1", r.m)
				if err != nil {
					t.Fatal(err)
				}
				x.apply(kr)
			}
			x.apply(&kgo.Record{Topic: topics.Dead, Value: []byte("poison")}) // ignored
			st, _, resend, ok := x.delivery("t", "dlv_1")
			if !ok {
				t.Fatal("delivery not indexed")
			}
			if st.GetState() != tt.wantState || st.GetAttempts() != tt.wantAttempts {
				t.Fatalf("status %v, want %v after %d attempts", st, tt.wantState, tt.wantAttempts)
			}
			if (resend != nil) != tt.wantPayload || (resend != nil && string(resend.GetPayload()) != `{"n":1}`) {
				t.Fatalf("resendable delivery %v, want payload: %v", resend, tt.wantPayload)
			}
			if _, _, _, ok := x.delivery("other", "dlv_1"); ok {
				t.Fatal("another tenant sees the delivery")
			}
			if _, ok := x.event("other", "evt_1"); ok {
				t.Fatal("another tenant sees the event")
			}
		})
	}
}
