package endpoints

import (
	"fmt"
	"slices"
	"testing"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

// apply applies rec (nil: a tombstone of id) as the view reads the log.
func apply(t *testing.T, s *Store, id string, rec *hooklinev1.EndpointRecord) {
	t.Helper()
	r := &kgo.Record{Topic: "endpoints", Key: []byte(id)}
	if rec != nil {
		var err error
		if r, err = hkafka.Record("endpoints", id, rec); err != nil {
			t.Fatal(err)
		}
	}
	s.applyRecord(r)
}

func subscribed(id string, version uint64, types ...string) *hooklinev1.EndpointRecord {
	rec := record(id, "https://"+id, version)
	rec.Endpoint.EventTypes = types
	return rec
}

func ids(recs []*hooklinev1.EndpointRecord) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.GetEndpoint().GetId())
	}
	return out
}

// TestMatchingFollowsEveryChangeOfTheView: Matching remembers its
// answers (every publish asks it twice, and it scanned all of a tenant's
// endpoints: 22.7 µs a call at 1,000), and a remembered answer never
// outlives a change of the view — a create, an update of the event
// types, a delete, a provisional Put and the log deciding it. A caller
// may filter the slice it gets in place without changing the next
// caller's.
func TestMatchingFollowsEveryChangeOfTheView(t *testing.T) {
	s := NewStore()
	want := func(step string, typ string, ids_ ...string) {
		t.Helper()
		for range 2 { // the second answer is the remembered one
			if got := ids(s.Matching("acme", typ)); !slices.Equal(got, ids_) {
				t.Fatalf("%s: Matching(%q) = %v, want %v", step, typ, got, ids_)
			}
		}
	}
	want("empty", "invoice.paid")
	apply(t, s, "ep_1", subscribed("ep_1", 1, "invoice.*"))
	want("created", "invoice.paid", "ep_1")
	apply(t, s, "ep_2", subscribed("ep_2", 1, "invoice.paid"))
	want("a second", "invoice.paid", "ep_1", "ep_2")
	want("another type", "invoice.voided", "ep_1")
	apply(t, s, "ep_1", subscribed("ep_1", 2, "customer.*"))
	want("types changed", "invoice.paid", "ep_2")
	want("types changed", "customer.created", "ep_1")
	s.Put(subscribed("ep_2", 2, "customer.created"))
	want("provisional", "invoice.paid")
	want("provisional", "customer.created", "ep_1", "ep_2")
	apply(t, s, "ep_2", subscribed("ep_2", 2, "invoice.paid")) // the log decided otherwise
	want("decided", "invoice.paid", "ep_2")
	want("decided", "customer.created", "ep_1")
	s.Put(subscribed("ep_3", 1)) // every type
	want("provisional create", "invoice.paid", "ep_2", "ep_3")
	apply(t, s, "ep_2", nil)
	want("deleted", "invoice.paid", "ep_3")
	if got := s.Matching("other", "invoice.paid"); len(got) != 0 {
		t.Fatalf("another tenant matches %v", ids(got))
	}

	got := s.Matching("acme", "customer.created")
	got[0] = nil // a caller filtering in place
	want("after a caller changed its slice", "customer.created", "ep_1", "ep_3")
}

// TestMatchingRemembersABoundedNumberOfAnswers: a tenant publishing
// ever new event types does not grow what Matching remembers.
func TestMatchingRemembersABoundedNumberOfAnswers(t *testing.T) {
	s := NewStore()
	apply(t, s, "ep_1", subscribed("ep_1", 1))
	for i := range 3 * maxRemembered {
		if got := s.Matching("acme", fmt.Sprintf("type.%d", i)); len(got) != 1 {
			t.Fatalf("type.%d matches %d endpoints, want 1", i, len(got))
		}
	}
	if n := s.remembered.n.Load(); n > maxRemembered {
		t.Fatalf("Matching remembers %d answers, want at most %d", n, maxRemembered)
	}
}
