package dispatcher

import (
	"fmt"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/lanes"
	"github.com/hookline/hookline/sdk/sign"
)

// A full window is a reason to spill what waits, not what the loop is
// about to start: deliveries just polled into a window that is now full,
// to an endpoint with room, are attempted in the loop's turn, not spilled
// round the retry path by the relief that runs in the same turn (make sim
// seed 9, with a window of 12, drained 164 deliveries through 32 spills).
func TestAFullWindowDoesNotSpillWhatCanStartNow(t *testing.T) {
	s := newTestService(t)
	s.cfg.WindowRecords = 4
	requests := countingEndpoint(t, s)
	e := testEngine(t, s)
	e.pollN(t, 0, 0, 4)
	if !e.w.full() {
		t.Fatal("the window is not full after 4 deliveries with a budget of 4")
	}
	now := s.now()
	e.turn(now) // the loop's turn after a poll
	e.waitOutstanding(t, 0)
	if n := requests.Load(); n != 4 {
		pw := e.w.parts[tp{s.topics.Deliveries, 0}]
		outs, _, _ := e.w.popDone(pw, now, nil)
		t.Fatalf("the receiver got %d of 4 deliveries its endpoint had room for; %d records written (spilled: the retry path)", n, len(outs))
	}
}

// A stuck ordered lane is relieved of the members that wait for its head,
// not of the head its followers wait for: the head of a per-endpoint
// lane comes back from the retry path (its lane_seq 1, read at offset
// 11) while its follower (lane_seq 5, read at offset 10) has held the
// partition for longer than --stuck-after. The head is attempted in the
// loop's turn; before, the relief in the same turn spilled it with its
// follower, and as the two came back in the same rhythm every time, the
// lane went round the retry path for ever without an attempt (make sim
// seed 9: a 1 MiB head spilled 20 times in 60 s, 0 POSTs).
func TestAStuckOrderedLaneIsNotRelievedOfTheHeadItWaitsFor(t *testing.T) {
	clock := newFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	f := newHeadAwayFixture(t, clock.option())
	s, e, rx, member := f.s, f.e, f.rx, f.member
	e.placeAt(t, member("dlv_follower", 5), 10)
	clock.Add(s.cfg.StuckAfter + time.Second)
	e.placeAt(t, member("dlv_head", 1), 11)
	e.turn(s.now())
	e.waitOutstanding(t, 0)
	if got := rx.received(); len(got) != 1 || got[0] != `"dlv_head"` {
		t.Fatalf("the receiver got %q; want the head, which nothing kept from starting", got)
	}
}

// An ordered lane's backlog budget is spent on members that wait for
// their head; the head itself, come back from the retry path, is what
// they wait for and is let in over the budget, not spilled as backlog.
// Before, with its followers filling the lane's queue limit (4 here: a
// lane without a rate limit may hold --window-records), the head was
// spilled every time it came back, the followers were spilled at
// --stuck-after and came back before it, and the lane went round the
// retry path for ever with no attempt (make sim seed 9, a window of 12:
// a head with two attempts made, 0 more in 60 s).
func TestAnOrderedLanesHeadIsNotSpilledForTheBacklogOfItsFollowers(t *testing.T) {
	f := newHeadAwayFixture(t)
	f.s.cfg.WindowRecords = 4
	e, rx, member := f.e, f.rx, f.member
	for i := range int64(4) {
		e.placeAt(t, member(fmt.Sprint("dlv_f", i), 5+i), 10+i)
	}
	e.placeAt(t, member("dlv_head", 1), 14)
	// One more follower, read in the same poll, is over the budget: it
	// is spilled, and goes outside. Its own followers are spilled with
	// it; the head and the followers before it do not wait for it.
	e.placeAt(t, member("dlv_late", 20), 15)
	e.runDry(t)
	if got := rx.received(); len(got) != 5 || got[0] != `"dlv_head"` || slices.Contains(got, `"dlv_late"`) {
		t.Fatalf("the receiver got %q; want the head, then the 4 followers before the spilled one", got)
	}
}

// headAwayFixture is an engine serving one per-endpoint ordered endpoint
// whose head, dlv_head (lane_seq 1), the lanes topic says is outside:
// in the retry path, on its way back.
type headAwayFixture struct {
	s  *Service
	e  *engine
	rx *scriptedReceiver
	ep *hooklinev1.EndpointRecord
}

func newHeadAwayFixture(t *testing.T, opts ...Option) *headAwayFixture {
	t.Helper()
	f := &headAwayFixture{rx: &scriptedReceiver{codes: map[string]int{}}}
	srv := httptest.NewServer(f.rx)
	t.Cleanup(srv.Close)
	f.s = newTestService(t, opts...)
	f.ep = endpoint(srv.URL, sign.GenerateSecret())
	f.ep.Endpoint.Ordering = hooklinev1.Ordering_ORDERING_PER_ENDPOINT
	f.ep.Endpoint.OutageModeDisabled = true
	f.s.store.Put(f.ep)
	lr, err := hkafka.Record(f.s.topics.Lanes, lanes.RecordKey(f.ep.GetEndpoint().GetId(), ""),
		&hooklinev1.LaneRecord{EndpointId: f.ep.GetEndpoint().GetId(), Outside: []*hooklinev1.LaneMember{{DeliveryId: "dlv_head", LaneSeq: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	f.s.lanes.Apply(lr)
	f.e = testEngine(t, f.s)
	return f
}

// member is the endpoint's delivery id at lane_seq laneSeq, its body
// its id in quotes.
func (f *headAwayFixture) member(id string, laneSeq int64) *hooklinev1.Delivery {
	return &hooklinev1.Delivery{DeliveryId: id, EventId: "evt_" + id, TenantId: "t", EndpointId: f.ep.GetEndpoint().GetId(),
		EventType: "a.b", Payload: []byte(`"` + id + `"`), Attempt: 1, LaneSeq: &laneSeq}
}
