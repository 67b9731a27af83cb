package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/kafkatest"
	"github.com/hookline/hookline/platform/lanes"
	"github.com/hookline/hookline/sdk/sign"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// These tests are of the rule "no partition is worked on with an unread
// ordered state" (docs/DESIGN.md, "Ordered delivery") and of the
// resolving of entries whose endpoint the view does not know yet.

// ordered is a first-read delivery of ep_1 with body `"<name>"`.
func ordered(name string) *hooklinev1.Delivery {
	return &hooklinev1.Delivery{DeliveryId: "dlv_" + name, EventId: "evt_" + name, TenantId: "t", EndpointId: "ep_1", EventType: "a.b",
		Payload: []byte(fmt.Sprintf("%q", name)), Attempt: 1}
}

// laneRecord is the lanes record of ep_1's per_endpoint lane listing
// members outside, by delivery id and lane_seq.
func laneRecord(t *testing.T, s *Service, outside map[string]int64) *kgo.Record {
	t.Helper()
	rec := &hooklinev1.LaneRecord{EndpointId: "ep_1"}
	for id, seq := range outside {
		rec.Outside = append(rec.Outside, &hooklinev1.LaneMember{DeliveryId: id, LaneSeq: seq})
	}
	r, err := hkafka.Record(s.topics.Lanes, lanes.RecordKey("ep_1", ""), rec)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// commitByHand does what a committed transaction does to the window and
// the lanes, without Kafka: it returns the outputs, the lanes records
// among them.
func (e *engine) commitByHand() []*kgo.Record {
	var outs []*kgo.Record
	for _, pw := range e.w.parts {
		outs, _, _ = e.w.popDone(pw, e.s.now(), outs)
	}
	outs = e.c.lanes.outputs(outs)
	e.c.lanes.ended(true)
	return outs
}

// TestAPartitionIsNotWorkedOnBeforeItsLanesAreRead: after an assignment
// the lanes view may not hold the previous owner's last lanes record
// (its sync failed, or timed out): here it still lists dlv_m outside,
// delivered and committed since. A member placed on that guess waits for
// dlv_m for ever (spilled every --stuck-after, freed after --max-hold).
// The partition's records must wait until a read of the lanes view
// succeeds, retried with backoff however often it fails.
func TestAPartitionIsNotWorkedOnBeforeItsLanesAreRead(t *testing.T) {
	rx := newBodyRecorder(t, "")
	s, e := orderedEngine(t, rx.Server, hooklinev1.Ordering_ORDERING_PER_ENDPOINT)
	s.lanes.Apply(laneRecord(t, s, map[string]int64{"dlv_m": 0})) // stale
	var reads atomic.Int32
	s.readLanes = func(context.Context) error {
		if reads.Add(1) <= 2 {
			return errors.New("lanes partition leader not available")
		}
		// The read catches up: the lane is empty.
		s.lanes.Apply(&kgo.Record{Topic: s.topics.Lanes, Key: []byte(lanes.RecordKey("ep_1", ""))})
		return nil
	}
	e.placeAt(t, ordered("f"), 5)
	e.runDry(t)
	if got := rx.bodies(); !slices.Equal(got, []string{`"f"`}) {
		t.Fatalf("receiver got %v after %d reads of the lanes view; want f, placed once the lanes were read", got, reads.Load())
	}
	if n := reads.Load(); n != 3 {
		t.Fatalf("%d reads of the lanes view; want 3 (two failed, retried)", n)
	}
}

// TestAnAbortedCommitReseedsItsLanesFromWhatWasCommitted: dlv_m went
// outside (a retry; committed, and the view read that), came back and
// was delivered (committed: its lane is empty again, a record the view
// has not read yet). Then a commit aborts and the window starts over
// from the committed offsets. The lanes must be seeded from a view that
// holds every committed lanes record: on the lagging view's word dlv_m
// is still outside and dlv_f waits for it for ever (found by issue 24:
// the 204 ordered deliveries left unfinished after a broker kill).
func TestAnAbortedCommitReseedsItsLanesFromWhatWasCommitted(t *testing.T) {
	var tries sync.Map
	rx := newBodyRecorder(t, "")
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// dlv_m's first attempt fails; everything else goes to rx.
		if _, again := tries.LoadOrStore(r.Header.Get("webhook-id"), true); !again && r.Header.Get("webhook-id") == "evt_m" {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		rx.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(flaky.Close)
	s, e := orderedEngine(t, flaky, hooklinev1.Ordering_ORDERING_PER_ENDPOINT)
	e.placeAt(t, ordered("m"), 0)
	e.runDry(t) // a retry: dlv_m is outside
	for _, r := range kafkatest.OnTopic(e.commitByHand(), s.topics.Lanes) {
		s.lanes.Apply(r) // the view reads it
	}
	back := ordered("m")
	back.Attempt, back.LaneSeq, back.Kind = 2, proto.Int64(0), hooklinev1.DeliveryKind_DELIVERY_KIND_RETRY
	e.placeAt(t, back, 1)
	e.runDry(t)
	lagging := kafkatest.OnTopic(e.commitByHand(), s.topics.Lanes)
	if len(lagging) != 1 {
		t.Fatalf("%d lanes records committed with dlv_m's delivery; want 1", len(lagging))
	}
	// The next commit aborts; a read of the lanes view catches up.
	s.readLanes = func(context.Context) error {
		for _, r := range lagging {
			s.lanes.Apply(r)
		}
		return nil
	}
	e.w.forgetAll()
	e.sweep(s.now())
	e.placeAt(t, ordered("f"), 2)
	e.runDry(t)
	if got := rx.bodies(); !slices.Equal(got, []string{`"m"`, `"f"`}) {
		t.Fatalf("receiver got %v; want m then f (f waits for a member already delivered)", got)
	}
}

// TestAPausedOrderedEndpointKeepsItsOrderOnResume: deliveries read
// while their ordered endpoint is paused are parked; they come back in
// release order, not publish order, and must still be delivered in
// publish order: each takes its place in the lane (lane_seq) before it
// is parked (issue 12 item 14, issue 24 item 4).
func TestAPausedOrderedEndpointKeepsItsOrderOnResume(t *testing.T) {
	rx := newBodyRecorder(t, "")
	s, e := orderedEngine(t, rx.Server, hooklinev1.Ordering_ORDERING_PER_ENDPOINT)
	active := s.store.Get("ep_1")
	paused := proto.Clone(active).(*hooklinev1.EndpointRecord)
	paused.Version++
	paused.Endpoint.Status = hooklinev1.EndpointStatus_ENDPOINT_STATUS_PAUSED
	s.store.Put(paused)
	e.placeAt(t, ordered("a"), 0)
	e.placeAt(t, ordered("b"), 1)
	e.runDry(t)
	var parked []*hooklinev1.Delivery
	for _, r := range kafkatest.OnTopic(e.commitByHand(), s.topics.Parked) {
		d := new(hooklinev1.Delivery)
		if err := proto.Unmarshal(r.Value, d); err != nil {
			t.Fatal(err)
		}
		d.DueAt, d.ParkedAt = nil, nil // released by the scheduler: due
		parked = append(parked, d)
	}
	if len(parked) != 2 {
		t.Fatalf("%d deliveries parked; want 2", len(parked))
	}
	resumed := proto.Clone(paused).(*hooklinev1.EndpointRecord)
	resumed.Version++
	resumed.Endpoint.Status = hooklinev1.EndpointStatus_ENDPOINT_STATUS_ACTIVE
	s.store.Put(resumed)
	e.placeAt(t, parked[1], 2) // b's release comes first
	e.placeAt(t, parked[0], 3)
	e.runDry(t)
	if got := rx.bodies(); !slices.Equal(got, []string{`"a"`, `"b"`}) {
		t.Fatalf("receiver got %v after the resume; want a then b", got)
	}
}

// TestALaterMemberOfANewEndpointWaitsForOneStillResolving: m0 waits for
// a sync of the endpoints view, which learns the endpoint meanwhile;
// m1, read after that, must not pass m0.
func TestALaterMemberOfANewEndpointWaitsForOneStillResolving(t *testing.T) {
	rx := newBodyRecorder(t, "")
	s := newTestService(t)
	e := testEngine(t, s)
	release := make(chan struct{})
	s.readEndpoints = func(ctx context.Context) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	e.placeAt(t, ordered("m0"), 0) // ep_1 unknown yet
	ep := endpoint(rx.URL, sign.GenerateSecret())
	ep.Endpoint.Ordering, ep.Endpoint.OutageModeDisabled = hooklinev1.Ordering_ORDERING_PER_ENDPOINT, true
	s.store.Put(ep)
	e.placeAt(t, ordered("m1"), 1)
	e.pump(s.now())
	close(release)
	e.runDry(t)
	if got := rx.bodies(); !slices.Equal(got, []string{`"m0"`, `"m1"`}) {
		t.Fatalf("receiver got %v; want m0 then m1", got)
	}
}

// TestAnUnknownEndpointsBacklogTakesOneResolver: a deleted endpoint's
// backlog (10,000 deliveries here) is resolved by one resolver of its
// partition, through at most two syncs of the endpoints view, not one
// goroutine and one sync each.
func TestAnUnknownEndpointsBacklogTakesOneResolver(t *testing.T) {
	s := newTestService(t)
	e := testEngine(t, s)
	release := make(chan struct{})
	var calls, inside, most atomic.Int32
	s.readEndpoints = func(ctx context.Context) error {
		calls.Add(1)
		n := inside.Add(1)
		defer inside.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	const backlog = 10_000
	for i := range backlog {
		d := ordered(fmt.Sprint(i))
		d.EndpointId = "ep_gone"
		e.placeAt(t, d, int64(i))
	}
	if e.outstanding > 1 {
		t.Errorf("%d resolvers out for one partition's backlog; want 1", e.outstanding)
	}
	close(release)
	e.runDry(t)
	if n := calls.Load(); n > 2 {
		t.Errorf("%d syncs of the endpoints view for one partition's backlog; want at most 2", n)
	}
	if n := most.Load(); n > 1 {
		t.Errorf("%d syncs at once; want 1", n)
	}
	if e.w.done != backlog {
		t.Fatalf("%d of %d deliveries settled", e.w.done, backlog)
	}
}

// TestAnOutsiderOnALongRetryRungIsNotForgottenAtMaxHold: a retry ladder
// may wait 7 days between attempts, longer than --max-hold (72 h); the
// lane must keep waiting for its retried head until the retry is due
// and the longest hold after it ended, or its followers overtake it.
func TestAnOutsiderOnALongRetryRungIsNotForgottenAtMaxHold(t *testing.T) {
	clock := newFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newTestService(t, clock.option())
	rx := failingOn(t, `"m"`)
	ep := endpoint(rx.URL, sign.GenerateSecret())
	ep.Endpoint.Ordering, ep.Endpoint.OutageModeDisabled = hooklinev1.Ordering_ORDERING_PER_ENDPOINT, true
	ep.Endpoint.RetryPolicy = &hooklinev1.RetryPolicy{
		Jitter:   hooklinev1.RetryPolicy_JITTER_NONE,
		MaxAge:   durationpb.New(30 * 24 * time.Hour),
		Schedule: &hooklinev1.RetryPolicy_Ladder{Ladder: &hooklinev1.RetryPolicy_DelayLadder{Delays: []*durationpb.Duration{durationpb.New(7 * 24 * time.Hour)}}},
	}
	s.store.Put(ep)
	e := testEngine(t, s)
	e.placeAt(t, ordered("m"), 0)
	e.runDry(t) // a retry due in 7 days
	outside := func() bool {
		_, ok := e.f.lanes["ep_1"].ord.keys[""].outside["dlv_m"]
		return ok
	}
	if !outside() {
		t.Fatal("dlv_m is not outside after its failed attempt")
	}
	e.sp.relieve(clock.Now().Add(s.cfg.MaxHold + time.Hour))
	if !outside() {
		t.Fatalf("dlv_m forgotten after --max-hold (%v) although its retry is due in 7 days", s.cfg.MaxHold)
	}
	e.sp.relieve(clock.Now().Add(7*24*time.Hour + s.cfg.MaxHold + time.Hour))
	if l := e.f.lanes["ep_1"]; l != nil && l.ord != nil && l.ord.keys[""] != nil && outside() {
		t.Fatal("dlv_m still outside after its retry was due and the longest hold after it ended")
	}
}

// TestTheCommittedEpochIsTheOneBeforeTheWatermark: a commit names the
// leader epoch of the last record it commits, not of the last record
// polled (which a new leader may have written).
func TestTheCommittedEpochIsTheOneBeforeTheWatermark(t *testing.T) {
	s := newTestService(t)
	e := testEngine(t, s)
	r0 := &kgo.Record{Topic: s.topics.Deliveries, Offset: 0, LeaderEpoch: 1}
	r1 := &kgo.Record{Topic: s.topics.Deliveries, Offset: 1, LeaderEpoch: 2}
	e0 := e.w.add(r0, s.now(), e.work)
	e.w.add(r1, s.now(), e.work)
	e.w.finish(e0, nil)
	_, mark, _ := e.w.popDone(e0.part, s.now(), nil)
	if mark != 1 || e0.part.epoch != 1 {
		t.Fatalf("commit at offset %d, epoch %d; want offset 1, epoch 1 (the epoch of offset 0)", mark, e0.part.epoch)
	}
}
