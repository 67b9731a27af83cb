package ingest

import (
	"slices"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
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

func TestFailedInPicksFailuresInsideTheWindowOnly(t *testing.T) {
	topics := hkafka.Config{TopicPrefix: "x."}.Topics()
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	x := newDeliveryIndex(topics)
	add := func(id string, state hooklinev1.DeliveryState, at time.Time, withPayload bool) {
		d := &hooklinev1.Delivery{DeliveryId: id, EventId: "evt_" + id, TenantId: "t", EndpointId: "ep_1", Payload: []byte(`{}`), Attempt: 1}
		if withPayload {
			r, _ := hkafka.Record(topics.Deliveries, "ep_1", d)
			x.apply(r)
		}
		res := &hooklinev1.AttemptResult{DeliveryId: id, EventId: d.GetEventId(), TenantId: "t", EndpointId: "ep_1", Attempt: 1, State: state, StartedAt: timestamppb.New(at)}
		r, _ := hkafka.Record(topics.Results, "ep_1", res)
		x.apply(r)
	}
	add("a", hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, t0, true)
	add("b", hooklinev1.DeliveryState_DELIVERY_STATE_EXPIRED, t0.Add(time.Minute), true)
	add("c", hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED, t0.Add(time.Minute), true)
	add("d", hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, t0.Add(-time.Second), true)
	add("e", hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, t0.Add(time.Hour), true)
	add("f", hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, t0.Add(time.Minute), false)
	add("g", hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED, t0.Add(time.Minute), true)

	tests := []struct {
		name            string
		tenant          string
		since, until    time.Time
		want            []string
		wantUnavailable int
	}{
		{"failed and expired in [since, until)", "t", t0, t0.Add(time.Hour), []string{"a", "b"}, 1},
		{"until is exclusive, since inclusive", "t", t0.Add(-time.Second), t0.Add(time.Second), []string{"a", "d"}, 0},
		{"another tenant", "u", t0.Add(-time.Hour), t0.Add(2 * time.Hour), nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, unavailable := x.failedIn(tt.tenant, "ep_1", tt.since, tt.until)
			var ids []string
			for _, d := range got {
				ids = append(ids, d.GetDeliveryId())
				if d.GetAttempt() != 2 || len(d.GetPayload()) == 0 {
					t.Fatalf("%s: attempt %d with payload %q, want attempt 2 with the payload", d.GetDeliveryId(), d.GetAttempt(), d.GetPayload())
				}
			}
			if !slices.Equal(ids, tt.want) || unavailable != tt.wantUnavailable {
				t.Fatalf("got %v (%d unavailable), want %v (%d)", ids, unavailable, tt.want, tt.wantUnavailable)
			}
		})
	}
}
