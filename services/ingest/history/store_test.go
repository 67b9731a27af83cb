package history

import (
	"fmt"
	"slices"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/sdk/ids"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

var testTopics = Topics{Deliveries: "x.deliveries", Results: "x.results", Dead: "x.dead"}

func openTest(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.TempDir(), testTopics, WithCacheBytes(1<<20), WithMemtableBytes(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// applyAll writes ms as records of their topics at increasing offsets.
func applyAll(t *testing.T, s *Store, ms ...struct {
	topic string
	m     proto.Message
},
) {
	t.Helper()
	var recs []*kgo.Record
	for i, m := range ms {
		r, err := hkafka.Record(m.topic, "ep_1", m.m)
		if err != nil {
			t.Fatal(err)
		}
		r.Offset = int64(i)
		recs = append(recs, r)
	}
	recs = append(recs, &kgo.Record{Topic: testTopics.Dead, Value: []byte("poison"), Offset: 99}) // ignored
	if err := s.Writer().Apply(recs, hkafka.Offsets{testTopics.Results: {0: int64(len(ms))}}); err != nil {
		t.Fatal(err)
	}
}

type rec = struct {
	topic string
	m     proto.Message
}

func TestStatusFollowsTheLatestResultAndThePayloadIsKeptOncePerEvent(t *testing.T) {
	now := time.Now()
	dlv, evt := ids.New(ids.Delivery, now), ids.New(ids.Event, now)
	d := &hooklinev1.Delivery{DeliveryId: dlv, EventId: evt, TenantId: "t", EndpointId: "ep_1", EventType: "a.b", Payload: []byte(`{"n":1}`), Attempt: 1, CreatedAt: timestamppb.New(now)}
	result := func(attempt uint32, state hooklinev1.DeliveryState) proto.Message {
		return &hooklinev1.AttemptResult{DeliveryId: dlv, EventId: evt, TenantId: "t", EndpointId: "ep_1", EventType: "a.b", Attempt: attempt, State: state}
	}
	tests := []struct {
		name         string
		give         []rec
		wantState    hooklinev1.DeliveryState
		wantAttempts uint32
		wantPayload  bool
	}{
		{"published, not attempted", []rec{{testTopics.Deliveries, d}}, hooklinev1.DeliveryState_DELIVERY_STATE_PENDING, 0, true},
		{"retried then delivered", []rec{{testTopics.Deliveries, d}, {testTopics.Results, result(1, hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED)}, {testTopics.Results, result(2, hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED)}}, hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED, 2, true},
		{"a decision without an attempt counts none", []rec{{testTopics.Deliveries, d}, {testTopics.Results, result(0, hooklinev1.DeliveryState_DELIVERY_STATE_PARKED)}}, hooklinev1.DeliveryState_DELIVERY_STATE_PARKED, 0, true},
		{"results only: no payload to resend", []rec{{testTopics.Results, result(1, hooklinev1.DeliveryState_DELIVERY_STATE_FAILED)}}, hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, 1, false},
		{"the dead letter carries the payload", []rec{{testTopics.Results, result(1, hooklinev1.DeliveryState_DELIVERY_STATE_FAILED)}, {testTopics.Dead, &hooklinev1.DeadLetter{Delivery: d}}}, hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openTest(t)
			applyAll(t, s, tt.give...)
			applyAll(t, s, tt.give...) // a replayed batch changes nothing
			st, _, resend, ok, err := s.Reader().Delivery("t", dlv)
			if err != nil || !ok {
				t.Fatalf("delivery not indexed: %v", err)
			}
			if st.GetState() != tt.wantState || st.GetAttempts() != tt.wantAttempts {
				t.Fatalf("status %v, want %v after %d attempts", st, tt.wantState, tt.wantAttempts)
			}
			if (resend != nil) != tt.wantPayload || (resend != nil && string(resend.GetPayload()) != `{"n":1}`) {
				t.Fatalf("resendable delivery %v, want payload: %v", resend, tt.wantPayload)
			}
			if _, _, _, ok, _ := s.Reader().Delivery("other", dlv); ok {
				t.Fatal("another tenant sees the delivery")
			}
			for _, state := range []hooklinev1.DeliveryState{hooklinev1.DeliveryState_DELIVERY_STATE_PENDING, tt.wantState} {
				page, err := s.Reader().Deliveries("t", Filter{EndpointID: "ep_1", State: state}, "", 10)
				if want := state == tt.wantState; err != nil || (len(page.Items) == 1) != want {
					t.Fatalf("listed by endpoint and state %v: %d, %v; want listed: %v", state, len(page.Items), err, want)
				}
			}
			if off, err := s.Offsets(); err != nil || off[testTopics.Results][0] != int64(len(tt.give)) {
				t.Fatalf("stored offsets %v, %v", off, err)
			}
		})
	}
}

func TestOnePayloadPerEventWhateverTheDeliveries(t *testing.T) {
	s := openTest(t)
	now := time.Now()
	evt := ids.New(ids.Event, now)
	payload := make([]byte, 64<<10)
	var give []rec
	for i := range 50 {
		give = append(give, rec{testTopics.Deliveries, &hooklinev1.Delivery{DeliveryId: ids.New(ids.Delivery, now), EventId: evt, TenantId: "t",
			EndpointId: fmt.Sprint("ep_", i), EventType: "a.b", Payload: payload, CreatedAt: timestamppb.New(now)}})
	}
	applyAll(t, s, give...)
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	// 50 copies would be 3.2 MiB; one is 64 KiB.
	if n := s.DiskBytes(); n > 1<<20 {
		t.Fatalf("index holds %d bytes for one 64 KiB payload delivered 50 times", n)
	}
	ev, ok, err := s.Reader().Event("t", evt)
	if err != nil || !ok || len(ev.GetDeliveries()) != 50 || len(ev.GetPayload()) != len(payload) {
		t.Fatalf("event: %d deliveries, %d payload bytes, %v", len(ev.GetDeliveries()), len(ev.GetPayload()), err)
	}
}

func TestSweepDeletesWhatTheTopicsNoLongerHold(t *testing.T) {
	s := openTest(t)
	now := time.Now()
	old, recent := now.Add(-48*time.Hour), now
	var give []rec
	var dlvs []string
	add := func(at time.Time, state hooklinev1.DeliveryState) {
		d := &hooklinev1.Delivery{DeliveryId: ids.New(ids.Delivery, at), EventId: ids.New(ids.Event, at), TenantId: "t", EndpointId: "ep_1",
			EventType: "a.b", Payload: []byte(`{}`), CreatedAt: timestamppb.New(at)}
		dlvs = append(dlvs, d.GetDeliveryId())
		give = append(give, rec{testTopics.Deliveries, d}, rec{testTopics.Results, &hooklinev1.AttemptResult{DeliveryId: d.GetDeliveryId(),
			EventId: d.GetEventId(), TenantId: "t", EndpointId: "ep_1", EventType: "a.b", Attempt: 1, State: state}})
	}
	add(old, hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED)
	add(old, hooklinev1.DeliveryState_DELIVERY_STATE_FAILED) // dead-lettered: kept while the dead topic has it
	add(recent, hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED)
	applyAll(t, s, give...)

	// Deliveries and results kept a day, dead letters a week.
	nd, ne, err := s.Writer().Sweep(now.Add(-24*time.Hour), now.Add(-7*24*time.Hour))
	if err != nil || nd != 1 || ne != 1 {
		t.Fatalf("Sweep deleted %d deliveries, %d events, %v; want 1, 1", nd, ne, err)
	}
	page, err := s.Reader().Deliveries("t", Filter{}, "", 10)
	if err != nil || len(page.Items) != 2 || page.Items[0].GetDeliveryId() != dlvs[1] || page.Items[1].GetDeliveryId() != dlvs[2] {
		t.Fatalf("after the sweep: %v, %v; want the dead-lettered and the recent delivery", page.Items, err)
	}
	if _, _, d, ok, err := s.Reader().Delivery("t", dlvs[1]); err != nil || !ok || d == nil {
		t.Fatalf("the dead-lettered delivery is no longer resendable: %v, %v, %v", d, ok, err)
	}
	for _, f := range []Filter{{EndpointID: "ep_1"}, {EventType: "a.b"}, {State: hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED}, {EndpointID: "ep_1", State: hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED}} {
		want := 2
		if f.State != 0 {
			want = 1
		}
		if page, err := s.Reader().Deliveries("t", f, "", 10); err != nil || len(page.Items) != want {
			t.Fatalf("index %+v after the sweep: %d entries, %v; want %d", f, len(page.Items), err, want)
		}
	}
	if evs, err := s.Reader().Events("t", EventFilter{}, "", 10); err != nil || len(evs.Items) != 2 {
		t.Fatalf("events after the sweep: %d, %v; want 2", len(evs.Items), err)
	}

	// Past the dead letters' retention too: only the recent one is left.
	if nd, ne, err := s.Writer().Sweep(now.Add(-24*time.Hour), now.Add(-24*time.Hour)); err != nil || nd != 1 || ne != 1 {
		t.Fatalf("second Sweep deleted %d deliveries, %d events, %v; want 1, 1", nd, ne, err)
	}
}

func TestListStopsAfterMaxScanAndResumesWhereItStopped(t *testing.T) {
	s := openTest(t)
	s.reader.maxScan = 200
	now := time.Now()
	var give []rec
	for i := range s.reader.maxScan + 10 {
		at := now.Add(time.Duration(i) * time.Millisecond)
		give = append(give, rec{testTopics.Deliveries, &hooklinev1.Delivery{DeliveryId: ids.New(ids.Delivery, at), EventId: ids.New(ids.Event, at),
			TenantId: "t", EndpointId: "ep_1", EventType: []string{"a.b", "c.d"}[min(i/s.reader.maxScan, 1)], CreatedAt: timestamppb.New(at)}})
	}
	applyAll(t, s, give...)
	// Only the last 10 are c.d: the first call reads maxScan entries of
	// the endpoint, finds none, and says where to go on.
	page, err := s.Reader().Deliveries("t", Filter{EndpointID: "ep_1", EventType: "c.d"}, "", 100)
	if err != nil || len(page.Items) != 0 || !page.More {
		t.Fatalf("first call: %d items, more %v, %v; want an empty page with more", len(page.Items), page.More, err)
	}
	page, err = s.Reader().Deliveries("t", Filter{EndpointID: "ep_1", EventType: "c.d"}, page.After, 100)
	if err != nil || len(page.Items) != 10 || page.More {
		t.Fatalf("second call: %d items, more %v, %v; want the 10 c.d deliveries, last page", len(page.Items), page.More, err)
	}
}

func TestFailedInPicksFailuresInsideTheWindowOnly(t *testing.T) {
	s := openTest(t)
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var give []rec
	add := func(id string, state hooklinev1.DeliveryState, at time.Time, withPayload bool) {
		d := &hooklinev1.Delivery{DeliveryId: id, EventId: "evt_" + id, TenantId: "t", EndpointId: "ep_1", Payload: []byte(`{}`), Attempt: 1}
		if withPayload {
			give = append(give, rec{testTopics.Deliveries, d})
		}
		give = append(give, rec{testTopics.Results, &hooklinev1.AttemptResult{DeliveryId: id, EventId: d.GetEventId(), TenantId: "t", EndpointId: "ep_1", Attempt: 1, State: state, StartedAt: timestamppb.New(at)}})
	}
	add("a", hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, t0, true)
	add("b", hooklinev1.DeliveryState_DELIVERY_STATE_EXPIRED, t0.Add(time.Minute), true)
	add("c", hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED, t0.Add(time.Minute), true)
	add("d", hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, t0.Add(-time.Second), true)
	add("e", hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, t0.Add(time.Hour), true)
	add("f", hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, t0.Add(time.Minute), false)
	add("g", hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED, t0.Add(time.Minute), true)
	applyAll(t, s, give...)

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
			matched, err := s.Reader().FailedIDs(tt.tenant, "ep_1", tt.since, tt.until, 100)
			if err != nil {
				t.Fatal(err)
			}
			if capped, err := s.Reader().FailedIDs(tt.tenant, "ep_1", tt.since, tt.until, 1); err != nil || len(capped) != min(1, len(matched)) {
				t.Fatalf("FailedIDs with a limit of 1: %v, %v", capped, err)
			}
			var ids []string
			unavailable := 0
			for _, id := range matched {
				d, found, err := s.Reader().Redeliverable(tt.tenant, id, tt.since, tt.until)
				switch {
				case err != nil:
					t.Fatal(err)
				case !found:
					t.Fatalf("%s: listed but not redeliverable", id)
				case d == nil:
					unavailable++
					continue
				}
				ids = append(ids, d.GetDeliveryId())
				if d.GetAttempt() != 2 || len(d.GetPayload()) == 0 {
					t.Fatalf("%s: attempt %d with payload %q, want attempt 2 with the payload", d.GetDeliveryId(), d.GetAttempt(), d.GetPayload())
				}
			}
			slices.Sort(ids)
			if !slices.Equal(ids, tt.want) || unavailable != tt.wantUnavailable {
				t.Fatalf("got %v (%d unavailable), want %v (%d)", ids, unavailable, tt.want, tt.wantUnavailable)
			}
		})
	}
}
