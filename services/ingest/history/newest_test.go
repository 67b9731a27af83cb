package history

import (
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/sdk/ids"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestDeliveriesNewestFirstPageDownwards: with Newest, a list comes
// newest first, through every index the filters pick, and its pages go
// on below the last id read, within the time window.
func TestDeliveriesNewestFirstPageDownwards(t *testing.T) {
	s := openTest(t)
	now := time.Unix(1_800_000_000, 0)
	var give []rec
	var want []string
	for i := range 7 {
		at := now.Add(time.Duration(i) * time.Second)
		id := ids.New(ids.Delivery, at)
		give = append(give, rec{testTopics.Deliveries, &hooklinev1.Delivery{DeliveryId: id, EventId: ids.New(ids.Event, at),
			TenantId: "t", EndpointId: "ep_1", EventType: "a.b", CreatedAt: timestamppb.New(at)}})
		want = append([]string{id}, want...)
	}
	applyAll(t, s, give...)
	for _, f := range []Filter{{Newest: true}, {Newest: true, EndpointID: "ep_1"}, {Newest: true, EventType: "a.b"}} {
		var got []string
		after := ""
		for {
			page, err := s.Reader().Deliveries("t", f, after, 3)
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range page.Items {
				got = append(got, st.GetDeliveryId())
			}
			if !page.More {
				break
			}
			after = page.After
		}
		if len(got) != len(want) {
			t.Fatalf("%+v: %d deliveries, want %d", f, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%+v: got %v, want newest first %v", f, got, want)
			}
		}
	}
	page, err := s.Reader().Deliveries("t", Filter{Newest: true, Since: now.Add(2 * time.Second), Until: now.Add(5 * time.Second)}, "", 10)
	if err != nil || len(page.Items) != 3 || page.Items[0].GetDeliveryId() != want[2] {
		t.Fatalf("a window newest first: %d items (%v), want the 3 in it, newest first", len(page.Items), err)
	}
}
