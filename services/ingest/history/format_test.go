package history

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/sdk/ids"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestValuesLeaveOutWhatTheirKeysHoldAndAreReadWhole: the summary, the
// latest record, each attempt and the event are stored without the ids
// their keys or the summary hold, and every read answers them whole.
func TestValuesLeaveOutWhatTheirKeysHoldAndAreReadWhole(t *testing.T) {
	s := openTest(t)
	now := time.Now()
	d := &hooklinev1.Delivery{DeliveryId: ids.New(ids.Delivery, now), EventId: ids.New(ids.Event, now), TenantId: "acme", EndpointId: "ep_1",
		EventType: "invoice.paid", Payload: []byte(`{"n":1}`), Attempt: 1, CreatedAt: timestamppb.New(now), Kind: hooklinev1.DeliveryKind_DELIVERY_KIND_FIRST}
	res := func(attempt uint32, state hooklinev1.DeliveryState) *hooklinev1.AttemptResult {
		return &hooklinev1.AttemptResult{DeliveryId: d.GetDeliveryId(), EventId: d.GetEventId(), TenantId: "acme", EndpointId: "ep_1",
			EventType: "invoice.paid", Attempt: attempt, State: state, StatusCode: 500 + int32(attempt), StartedAt: timestamppb.New(now)}
	}
	r1, r2 := res(1, hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED), res(2, hooklinev1.DeliveryState_DELIVERY_STATE_FAILED)
	applyAll(t, s, rec{testTopics.Deliveries, d}, rec{testTopics.Results, r1}, rec{testTopics.Results, r2})
	if d.GetTenantId() != "acme" || len(d.GetPayload()) == 0 || r1.GetDeliveryId() == "" {
		t.Fatal("Apply changed the records it was given")
	}

	// Stored: no id a key or the summary holds.
	it, err := s.db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	stored := 0
	for it.First(); it.Valid(); it.Next() {
		k, v := it.Key(), it.Value()
		var m proto.Message
		repeats := []string{d.GetDeliveryId(), d.GetEventId(), "acme", "ep_1"}
		switch {
		case k[0] == tagStatus[0] && k[1] == 0:
			m = &hooklinev1.DeliveryStatus{}
			repeats = repeats[:1] // the summary is where the others are held
		case k[0] == tagMeta[0] && k[1] == 0:
			m = &hooklinev1.Delivery{}
		case k[0] == tagAttempt[0] && k[1] == 0:
			m = &hooklinev1.AttemptResult{}
		case k[0] == tagEvent[0] && k[1] == 0:
			m = &hooklinev1.GetEventResponse{}
		default:
			continue
		}
		if err := proto.Unmarshal(v, m); err != nil {
			t.Fatal(err)
		}
		stored++
		for _, id := range repeats {
			if got := fmt.Sprint(m); strings.Contains(got, id) {
				t.Errorf("the value of %q repeats %q: %v", k, id, got)
			}
		}
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if stored != 5 {
		t.Fatalf("%d values read, want 5 (summary, record, two attempts, event)", stored)
	}

	// Read whole.
	st, attempts, resend, ok, err := s.Reader().Delivery("acme", d.GetDeliveryId())
	if err != nil || !ok {
		t.Fatalf("Delivery: %v, %v", ok, err)
	}
	if st.GetDeliveryId() != d.GetDeliveryId() || st.GetEventId() != d.GetEventId() || st.GetEndpointId() != "ep_1" || st.GetEventType() != "invoice.paid" {
		t.Fatalf("summary %v", st)
	}
	if len(attempts) != 2 || !proto.Equal(attempts[0], r1) || !proto.Equal(attempts[1], r2) {
		t.Fatalf("attempts %v, want %v and %v", attempts, r1, r2)
	}
	if !proto.Equal(resend, d) {
		t.Fatalf("resendable %v, want %v", resend, d)
	}
	ev, ok, err := s.Reader().Event("acme", d.GetEventId())
	if err != nil || !ok || ev.GetEventId() != d.GetEventId() || ev.GetEventType() != "invoice.paid" || len(ev.GetDeliveries()) != 1 ||
		ev.GetDeliveries()[0].GetDeliveryId() != d.GetDeliveryId() {
		t.Fatalf("event %v, %v, %v", ev, ok, err)
	}
	events, err := s.Reader().Events("acme", EventFilter{}, "", 10)
	if err != nil || len(events.Items) != 1 || events.Items[0].GetEventId() != d.GetEventId() {
		t.Fatalf("events %v, %v", events.Items, err)
	}
	page, err := s.Reader().Deliveries("acme", Filter{}, "", 10)
	if err != nil || len(page.Items) != 1 || page.Items[0].GetDeliveryId() != d.GetDeliveryId() {
		t.Fatalf("deliveries %v, %v", page.Items, err)
	}
	failed, err := s.Reader().FailedIDs("acme", "ep_1", now.Add(-time.Hour), now.Add(time.Hour), 10)
	if err != nil || len(failed) != 1 {
		t.Fatalf("FailedIDs %v, %v", failed, err)
	}
	again, found, err := s.Reader().Redeliverable("acme", d.GetDeliveryId(), now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil || !found || again.GetTenantId() != "acme" || again.GetEndpointId() != "ep_1" || again.GetAttempt() != 3 {
		t.Fatalf("Redeliverable %v, %v, %v", again, found, err)
	}
}

// TestDeliveredHasNoStateEntriesAndIsListedByIt: a delivery that ends
// DELIVERED leaves no state entry (its earlier state's entries go), and
// lists by DELIVERED, alone or with its endpoint, still find it, and
// only it.
func TestDeliveredHasNoStateEntriesAndIsListedByIt(t *testing.T) {
	s := openTest(t)
	now := time.Now()
	var give []rec
	var delivered, failed []string
	for i := range 6 {
		at := now.Add(time.Duration(i) * time.Millisecond)
		ep := fmt.Sprint("ep_", i%2)
		d := &hooklinev1.Delivery{DeliveryId: ids.New(ids.Delivery, at), EventId: ids.New(ids.Event, at), TenantId: "t", EndpointId: ep,
			EventType: "a.b", Payload: []byte(`{}`), CreatedAt: timestamppb.New(at)}
		state := hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED
		if i%3 == 2 {
			state = hooklinev1.DeliveryState_DELIVERY_STATE_FAILED
			failed = append(failed, d.GetDeliveryId())
		} else {
			delivered = append(delivered, d.GetDeliveryId())
		}
		give = append(give, rec{testTopics.Deliveries, d},
			rec{testTopics.Results, &hooklinev1.AttemptResult{DeliveryId: d.GetDeliveryId(), EventId: d.GetEventId(), TenantId: "t", EndpointId: ep,
				EventType: "a.b", Attempt: 1, State: hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED}},
			rec{testTopics.Results, &hooklinev1.AttemptResult{DeliveryId: d.GetDeliveryId(), EventId: d.GetEventId(), TenantId: "t", EndpointId: ep,
				EventType: "a.b", Attempt: 2, State: state}})
	}
	applyAll(t, s, give...)

	var entries []string
	for _, tag := range []string{tagByState, tagByEpState} {
		if err := scan(s.db, prefix(tag), nil, func(k, _ []byte) (bool, error) {
			entries = append(entries, fmt.Sprintf("%q", k))
			return true, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if len(entries) != 2*len(failed) {
		t.Fatalf("state entries %v; want one by state and one by endpoint and state for each of the %d failed only", entries, len(failed))
	}
	listed := func(f Filter) []string {
		t.Helper()
		page, err := s.Reader().Deliveries("t", f, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, st := range page.Items {
			out = append(out, st.GetDeliveryId())
		}
		return out
	}
	D := hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED
	if got := listed(Filter{State: D}); fmt.Sprint(got) != fmt.Sprint(delivered) {
		t.Fatalf("by DELIVERED %v, want %v", got, delivered)
	}
	if got := listed(Filter{State: D, EndpointID: "ep_0"}); fmt.Sprint(got) != fmt.Sprint([]string{delivered[0], delivered[3]}) {
		t.Fatalf("by DELIVERED on ep_0 %v, want %v", got, []string{delivered[0], delivered[3]})
	}
	if got := listed(Filter{State: hooklinev1.DeliveryState_DELIVERY_STATE_FAILED}); fmt.Sprint(got) != fmt.Sprint(failed) {
		t.Fatalf("by FAILED %v, want %v", got, failed)
	}
	if got := listed(Filter{State: hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED}); len(got) != 0 {
		t.Fatalf("by RETRY_SCHEDULED %v, want none: every delivery moved on", got)
	}
}

// TestSweepWalksEveryTenant: retention reads each tenant's summaries and
// events (there are no age entries), and deletes the old ones of every
// tenant, whatever the order of their ids across tenants.
func TestSweepWalksEveryTenant(t *testing.T) {
	s := openTest(t)
	now := time.Now()
	var give []rec
	for i, tenant := range []string{"a", "b", "bb", "c"} {
		for _, at := range []time.Time{now.Add(-48*time.Hour + time.Duration(i)*time.Second), now.Add(time.Duration(i) * time.Second)} {
			d := &hooklinev1.Delivery{DeliveryId: ids.New(ids.Delivery, at), EventId: ids.New(ids.Event, at), TenantId: tenant, EndpointId: "ep_1",
				EventType: "a.b", Payload: []byte(`{}`), CreatedAt: timestamppb.New(at)}
			give = append(give, rec{testTopics.Deliveries, d}, rec{testTopics.Results, &hooklinev1.AttemptResult{DeliveryId: d.GetDeliveryId(),
				EventId: d.GetEventId(), TenantId: tenant, EndpointId: "ep_1", EventType: "a.b", Attempt: 1, State: hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED}})
		}
	}
	applyAll(t, s, give...)
	nd, ne, err := s.Writer().Sweep(now.Add(-24*time.Hour), now.Add(-24*time.Hour))
	if err != nil || nd != 4 || ne != 4 {
		t.Fatalf("Sweep deleted %d deliveries, %d events, %v; want 4 and 4 (one of each tenant)", nd, ne, err)
	}
	for _, tenant := range []string{"a", "b", "bb", "c"} {
		page, err := s.Reader().Deliveries(tenant, Filter{}, "", 10)
		if err != nil || len(page.Items) != 1 {
			t.Fatalf("tenant %s keeps %d deliveries, %v; want its recent one", tenant, len(page.Items), err)
		}
		evs, err := s.Reader().Events(tenant, EventFilter{}, "", 10)
		if err != nil || len(evs.Items) != 1 {
			t.Fatalf("tenant %s keeps %d events, %v; want its recent one", tenant, len(evs.Items), err)
		}
	}
}

// TestAnIndexOfAnotherFormatIsRebuilt: an index written before format 2
// (no format stored) or of another format is emptied at Open, its
// offsets with it, so the follower reads the topics from their start;
// an index of this format keeps what it holds.
func TestAnIndexOfAnotherFormatIsRebuilt(t *testing.T) {
	for name, stored := range map[string][]byte{"none stored": nil, "format 1": binary.BigEndian.AppendUint64(nil, 1)} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			db, err := pebble.Open(dir, &pebble.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if stored != nil {
				if err := db.Set([]byte(tagFormat), stored, pebble.Sync); err != nil {
					t.Fatal(err)
				}
			}
			if err := db.Set(offsetKey(testTopics.Results, 0), binary.BigEndian.AppendUint64(nil, 7), pebble.Sync); err != nil {
				t.Fatal(err)
			}
			if err := db.Set([]byte("td\x00dlv_1\x00t"), nil, pebble.Sync); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}

			s, err := Open(dir, testTopics)
			if err != nil {
				t.Fatal(err)
			}
			if off, err := s.Offsets(); err != nil || len(off) != 0 {
				t.Fatalf("offsets after the rebuild %v, %v; want none", off, err)
			}
			if empty, err := isEmpty(s.db); err != nil || empty {
				t.Fatalf("no format stored: %v", err)
			}
			if ok, err := s.reader.has([]byte("td\x00dlv_1\x00t")); err != nil || ok {
				t.Fatalf("an old key survived the rebuild: %v", err)
			}
			applyAll(t, s, rec{testTopics.Results, &hooklinev1.AttemptResult{DeliveryId: "dlv_2", TenantId: "t", Attempt: 1,
				State: hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED}})
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}

			s, err = Open(dir, testTopics) // this format: kept
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if off, err := s.Offsets(); err != nil || off[testTopics.Results][0] != 1 {
				t.Fatalf("offsets after a reopen %v, %v; want those applied", off, err)
			}
			if _, _, _, ok, err := s.Reader().Delivery("t", "dlv_2"); err != nil || !ok {
				t.Fatalf("a reopened index lost a delivery: %v, %v", ok, err)
			}
		})
	}
}
