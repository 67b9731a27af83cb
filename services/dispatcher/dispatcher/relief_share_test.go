package dispatcher

import (
	"fmt"
	"testing"
	"time"
)

// A partition over its share of the window reads no more (shareFetch
// pauses it) until what it holds leaves. Members of an ordered lane
// waiting for a member outside memory wait for a record that only that
// read brings back: a member's way back (its retry, its spill, its
// release) is written to its endpoint's partition, behind them. Held
// until --stuck-after, one key at a time, such members kept their own
// partition from reading what they waited for: make sim seed 48 (a
// window of 15, ordered lanes whose heads went round the retry path)
// ended with partition 2 paused 181 records behind its end, its window
// share filled by nine members that each waited for a member whose way
// back was among those records, and 96 deliveries open after the
// faults stopped (1m41s).
func TestMembersWaitingForAMemberOutsideDoNotHoldAPartitionOverItsShare(t *testing.T) {
	clock := newFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	f := newHeadAwayFixture(t, clock.option()) // dlv_head is outside
	f.e.w.maxRecords = 6
	for i := range int64(4) {
		f.e.placeAt(t, f.member(fmt.Sprint("dlv_f", i), 5+i), 10+i)
	}
	f.e.runDry(t)
	pw := f.e.w.parts[tp{f.s.topics.Deliveries, 0}]
	if l := f.e.f.lanes["ep_1"]; l.queued != 4 || !f.e.w.overShare(pw) {
		t.Fatalf("%d members wait in memory, partition over its share %v; want 4 waiting for the head, over the share", l.queued, f.e.w.overShare(pw))
	}
	clock.Add(reliefTick) // well within --stuck-after
	f.e.turn(f.s.now())
	if l := f.e.f.lanes["ep_1"]; l.queued != 0 {
		t.Fatalf("%d members wait in memory for a member outside while their partition is over its share; want them spilled (their head comes back only through that partition)", l.queued)
	}
	due := f.dues(t, f.e.commitNow())
	for i := range 4 {
		if _, ok := due[fmt.Sprint("dlv_f", i)]; !ok {
			t.Fatalf("written to the retries topic: %v; want every follower deferred", due)
		}
	}
	if f.e.w.overShare(pw) {
		t.Fatal("the partition is still over its share once its waiting members are spilled")
	}
}

// What a partition over its share waits for by itself — a head in
// flight, or a member that may start — stays: only members that wait for
// a member outside memory are spilled early.
func TestAPartitionOverItsShareKeepsMembersWaitingForAHeadInFlight(t *testing.T) {
	clock := newFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	f := newHeadAwayFixture(t, clock.option())
	f.e.w.maxRecords = 6
	hang := f.rx.hold(`"dlv_head"`)
	f.e.placeAt(t, f.member("dlv_head", 1), 9) // back: it starts and hangs
	for i := range int64(3) {
		f.e.placeAt(t, f.member(fmt.Sprint("dlv_f", i), 5+i), 10+i)
	}
	f.e.pump(f.s.now())
	pw := f.e.w.parts[tp{f.s.topics.Deliveries, 0}]
	if l := f.e.f.lanes["ep_1"]; l.queued != 3 || l.inFlight != 1 || !f.e.w.overShare(pw) {
		t.Fatalf("%d waiting, %d in flight, over its share %v; want the head in flight, 3 followers waiting, over the share", l.queued, l.inFlight, f.e.w.overShare(pw))
	}
	clock.Add(reliefTick)
	f.e.turn(f.s.now())
	if l := f.e.f.lanes["ep_1"]; l.queued != 3 {
		t.Fatalf("%d of 3 followers of a head in flight wait in memory; want all (the head ends by itself)", l.queued)
	}
	hang()
	f.e.runDry(t)
	if got := f.rx.received(); len(got) != 4 {
		t.Fatalf("the receiver got %q; want the head and its 3 followers", got)
	}
}
