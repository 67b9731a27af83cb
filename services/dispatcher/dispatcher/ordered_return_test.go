package dispatcher

import (
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/kafkatest"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/durationpb"
)

// An ordered lane's member that leaves memory behind a member outside
// is due back no earlier than that member: it cannot start before it,
// and one back first waits in memory, holding its partition, until it
// is spilled again at --stuck-after — due after every spill made in the
// meantime (the lane's spill rhythm), so after the member it waits for,
// whose own return was written later. Each round let one member through:
// make sim seed 48 drained a per-endpoint lane of 30 members in over 3
// minutes, 238 spills, the head always due after its followers.

// returnFixture is a per-endpoint ordered endpoint whose receiver
// refuses dlv_head with 503; a retry is due 60 s after a failure.
type returnFixture struct {
	*headAwayFixture
	clock *fakeClock
}

const headRetryIn = time.Minute

// retriesIn gives ep a retry ladder of one rung, d, without jitter.
// Tests of members waiting in memory for a retried head use a rung
// within --stuck-after (the default policy's first rung, 30–60 s, is
// longer: a retried head's followers then wait outside memory).
func retriesIn(ep *hooklinev1.EndpointRecord, d time.Duration) {
	ep.Endpoint.RetryPolicy = &hooklinev1.RetryPolicy{
		Schedule: &hooklinev1.RetryPolicy_Ladder{Ladder: &hooklinev1.RetryPolicy_DelayLadder{
			Delays: []*durationpb.Duration{durationpb.New(d)},
		}},
		Jitter: hooklinev1.RetryPolicy_JITTER_NONE,
	}
}

func newReturnFixture(t *testing.T) *returnFixture {
	t.Helper()
	clock := newFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	f := &returnFixture{headAwayFixture: newHeadAwayFixture(t, clock.option()), clock: clock}
	retriesIn(f.ep, headRetryIn)
	f.s.store.Put(f.ep)
	f.rx.set(`"dlv_head"`, 503)
	return f
}

// dues returns the due time of each delivery written to the retries
// topic in outs, by delivery id.
func (f *headAwayFixture) dues(t *testing.T, outs []*kgo.Record) map[string]time.Time {
	t.Helper()
	due := map[string]time.Time{}
	for _, d := range kafkatest.DecodeTopic(t, outs, f.s.topics.Retries, newDelivery) {
		due[d.GetDeliveryId()] = d.GetDueAt().AsTime()
	}
	return due
}

// notBefore fails unless follower is due back, and head due back, with
// the follower no earlier than the head.
func notBefore(t *testing.T, due map[string]time.Time, follower, head string) {
	t.Helper()
	h, ok := due[head]
	if !ok {
		t.Fatalf("written to the retries topic: %v; want %s's retry", due, head)
	}
	fl, ok := due[follower]
	if !ok {
		t.Fatalf("written to the retries topic: %v; want %s deferred", due, follower)
	}
	if fl.Before(h) {
		t.Fatalf("%s is due back at %s, %s before %s it waits for", follower, fl.Format(time.TimeOnly), h.Sub(fl), head)
	}
}

// A member read while the member before it is outside and due back
// later than --stuck-after from now waits outside memory from the start,
// due no earlier than that member.
func TestAMemberReadBehindAHeadDueLaterThanStuckAfterWaitsOutsideMemory(t *testing.T) {
	f := newReturnFixture(t)
	f.e.placeAt(t, f.member("dlv_head", 1), 10)
	f.e.runDry(t)
	f.e.placeAt(t, f.member("dlv_follower", 5), 11)
	f.e.runDry(t)
	if l := f.e.f.lanes["ep_1"]; l.queued != 0 {
		t.Fatalf("%d members wait in memory for a head due back in %s; want none (they hold the partition)", l.queued, headRetryIn)
	}
	notBefore(t, f.dues(t, f.e.commitNow()), "dlv_follower", "dlv_head")
}

// A member waiting in memory when the member before it goes outside,
// due back later than --stuck-after from now, is spilled at once, due no
// earlier than it.
func TestAMemberWaitingWhenItsHeadGoesOutForLongerThanStuckAfterIsSpilledBehindIt(t *testing.T) {
	f := newReturnFixture(t)
	f.e.placeAt(t, f.member("dlv_head", 1), 10)
	f.e.placeAt(t, f.member("dlv_follower", 5), 11)
	f.e.runDry(t)
	if got := f.rx.received(); len(got) != 1 {
		t.Fatalf("the receiver got %q; want the head only", got)
	}
	if l := f.e.f.lanes["ep_1"]; l.queued != 0 {
		t.Fatalf("%d members wait in memory for a head due back in %s; want none", l.queued, headRetryIn)
	}
	notBefore(t, f.dues(t, f.e.commitNow()), "dlv_follower", "dlv_head")
}

// A member spilled for any other reason (a full window here) while the
// member before it is outside is due back no earlier than it, even when
// that is sooner than --stuck-after.
func TestAMemberSpilledFromAFullWindowIsDueNoEarlierThanItsHead(t *testing.T) {
	f := newReturnFixture(t)
	f.ep.Endpoint.RetryPolicy.GetLadder().Delays[0] = durationpb.New(f.s.cfg.StuckAfter / 2)
	f.s.store.Put(f.ep)
	f.e.placeAt(t, f.member("dlv_head", 1), 10)
	f.e.runDry(t)
	head := f.dues(t, f.e.commitNow())
	f.e.w.maxRecords = 2
	f.e.placeAt(t, f.member("dlv_f1", 5), 11)
	f.e.placeAt(t, f.member("dlv_f2", 6), 12)
	f.e.runDry(t)
	if l := f.e.f.lanes["ep_1"]; l.queued != 2 || !f.e.w.full() {
		t.Fatalf("%d members wait in memory, window full %v; want both followers waiting in a full window", l.queued, f.e.w.full())
	}
	f.e.turn(f.s.now()) // the relief spills the full window's waiting lane
	due := f.dues(t, f.e.commitNow())
	due["dlv_head"] = head["dlv_head"]
	notBefore(t, due, "dlv_f1", "dlv_head")
	notBefore(t, due, "dlv_f2", "dlv_f1")
}
