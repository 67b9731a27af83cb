package dispatcher

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestAdmitEnforcesTheConcurrencyCap(t *testing.T) {
	rs := newReceivers()
	now := time.Unix(1_700_000_000, 0)
	for i := range 3 {
		if ok, _, _ := rs.admit("ep", now, 3, 0, time.Second, time.Time{}); !ok {
			t.Fatalf("attempt %d refused under the cap", i+1)
		}
	}
	ok, at, why := rs.admit("ep", now, 3, 0, time.Second, time.Time{})
	if ok || why != "concurrency cap" || !at.Equal(now.Add(time.Second)) {
		t.Fatalf("4th attempt: ok=%v at=%v why=%q", ok, at, why)
	}
	if ok, _, _ := rs.admit("other", now, 3, 0, time.Second, time.Time{}); !ok {
		t.Fatal("another endpoint is not limited by this one's cap")
	}
	rs.done("ep")
	if ok, _, _ := rs.admit("ep", now, 3, 0, time.Second, time.Time{}); !ok {
		t.Fatal("a finished attempt must free its slot")
	}
}

func TestAdmitNeverExceedsTheRateOverAnySecond(t *testing.T) {
	rs := newReceivers()
	start := time.Unix(1_700_000_000, 0)
	var starts []time.Time
	// Offer a new attempt every millisecond for 10 s at a limit of 5/s;
	// refused ones come back at their reserved time, as the scheduler
	// would bring them.
	type deferred struct{ at time.Time }
	var waiting []deferred
	for ms := range 10_000 {
		now := start.Add(time.Duration(ms) * time.Millisecond)
		try := func(reserved time.Time) {
			ok, at, _ := rs.admit("ep", now, 1000, 5, time.Second, reserved)
			if ok {
				starts = append(starts, now)
				rs.done("ep")
				return
			}
			waiting = append(waiting, deferred{at})
		}
		var still []deferred
		due := waiting
		waiting = nil
		for _, d := range due {
			if d.at.After(now) {
				still = append(still, d)
				continue
			}
			try(d.at)
		}
		waiting = append(still, waiting...)
		if ms%100 == 0 { // 10 new deliveries a second, twice the limit
			try(time.Time{})
		}
	}
	for i := range starts {
		n := 0
		for j := i; j < len(starts) && starts[j].Sub(starts[i]) < time.Second; j++ {
			n++
		}
		if n > 6 {
			t.Fatalf("%d attempts within 1 s from %v (limit 5/s + 1 burst)", n, starts[i])
		}
	}
	if len(starts) < 49 {
		t.Fatalf("only %d attempts in 10 s at 5/s", len(starts))
	}
	for i := 1; i < len(starts); i++ {
		if gap := starts[i].Sub(starts[i-1]); gap > 201*time.Millisecond {
			t.Fatalf("a %v gap while deliveries waited: reserved slots were lost", gap)
		}
	}
}

func TestObserveTellsOncePerOutageRemindsAndRecovers(t *testing.T) {
	rs := newReceivers()
	now := time.Unix(1_700_000_000, 0)
	var events []healthEvent
	fail := func(d string, permanent bool) {
		events = append(events, rs.observe("ep", d, false, permanent, now, 5, 2, 3, 6*time.Hour))
	}
	for i := range 4 {
		fail(fmt.Sprint("dlv", i), false)
	}
	fail("dlv4", false) // 5th: failing
	for range 10 {
		fail("dlv5", false) // no more notices within the reminder period
	}
	now = now.Add(6 * time.Hour)
	fail("dlv6", false) // reminder
	fail("dlv7", false)
	want := []healthEvent{healthNone, healthNone, healthNone, healthNone, healthFailing}
	for range 10 {
		want = append(want, healthNone)
	}
	want = append(want, healthReminder, healthNone)
	if !slices.Equal(events, want) {
		t.Fatalf("events %v, want %v", events, want)
	}
	if ev := rs.observe("ep", "dlv8", true, false, now, 5, 2, 3, 6*time.Hour); ev != healthRecovered {
		t.Fatalf("first success after an outage: %v, want recovered", ev)
	}
	if ev := rs.observe("ep", "dlv9", true, false, now, 5, 2, 3, 6*time.Hour); ev != healthNone {
		t.Fatalf("second success: %v, want nothing", ev)
	}
	// Three permanent failures in a row pause the endpoint, once.
	var got []healthEvent
	for i := range 4 {
		got = append(got, rs.observe("ep", fmt.Sprint("p", i), false, true, now, 5, 2, 3, 6*time.Hour))
	}
	if !slices.Equal(got, []healthEvent{healthNone, healthNone, healthAutoPause, healthNone}) {
		t.Fatalf("permanent streak events %v", got)
	}
}

func TestOutageModeStartsAfterDistinctDeliveriesAndProbesOneAtATime(t *testing.T) {
	rs := newReceivers()
	now := time.Unix(1_700_000_000, 0)
	rs.observe("ep", "a", false, false, now, 5, 2, 0, 0)
	rs.observe("ep", "a", false, false, now, 5, 2, 0, 0) // same delivery again: not yet
	if g, _ := rs.outageGate("ep", now, 1, time.Minute); g != gatePass {
		t.Fatalf("one failing delivery must not start outage mode, got %v", g)
	}
	rs.observe("ep", "b", false, false, now, 5, 2, 0, 0)
	if g, _ := rs.outageGate("ep", now, 1, time.Minute); g != gateProbe {
		t.Fatalf("first delivery in an outage: %v, want the probe", g)
	}
	if g, until := rs.outageGate("ep", now, 1, time.Minute); g != gateHold || !until.Equal(now.Add(time.Minute)) {
		t.Fatalf("while a probe is out: %v until %v, want hold for the recheck", g, until)
	}
	rs.probed("ep", now, func(int) time.Duration { return 30 * time.Second })
	if g, until := rs.outageGate("ep", now, 1, time.Minute); g != gateHold || !until.Equal(now.Add(30*time.Second)) {
		t.Fatalf("after a failed probe: %v until %v, want hold until the next probe", g, until)
	}
	if g, _ := rs.outageGate("ep", now.Add(30*time.Second), 2, time.Minute); g != gateHold {
		t.Fatal("a delivery attempted before must not be the probe")
	}
	rs.observe("ep", "c", true, false, now, 5, 2, 0, 0)
	if g, _ := rs.outageGate("ep", now, 3, time.Minute); g != gatePass {
		t.Fatal("a success ends outage mode")
	}
}

// TestLateReservedHoldersGetDistinctSlots: deliveries holding reserved
// slots that all come back together after their slots (a scheduler that
// was paused) are spread one interval apart, not all re-deferred to the
// same instant where again only one would pass.
func TestLateReservedHoldersGetDistinctSlots(t *testing.T) {
	rs := newReceivers()
	start := time.Unix(1_700_000_000, 0)
	const n = 50
	reserved := make([]time.Time, n)
	for i := range n {
		ok, at, _ := rs.admit("ep", start, 1000, 100, time.Second, time.Time{})
		if i == 0 {
			if !ok {
				t.Fatal("first attempt refused")
			}
			rs.done("ep")
			continue
		}
		reserved[i] = at
	}
	// They all return 30 s late, at the same instant.
	late := start.Add(30 * time.Second)
	var retry []time.Time
	admitted := 0
	for i := 1; i < n; i++ {
		ok, at, _ := rs.admit("ep", late, 1000, 100, time.Second, reserved[i])
		if ok {
			admitted++
			rs.done("ep")
			continue
		}
		retry = append(retry, at)
	}
	if admitted != 1 {
		t.Fatalf("%d admitted at one instant, want 1 (the rate is 100/s)", admitted)
	}
	for i, at := range retry {
		if want := late.Add(time.Duration(i+1) * 10 * time.Millisecond); !at.Equal(want) {
			t.Fatalf("holder %d told to come back at +%v, want +%v", i, at.Sub(late), want.Sub(late))
		}
	}
	// Back at their new slots, each passes.
	for i, at := range retry {
		if ok, _, _ := rs.admit("ep", at, 1000, 100, time.Second, at); !ok {
			t.Fatalf("holder %d refused at its new slot", i)
		}
		rs.done("ep")
	}
}

// TestHealthIsSeededFromNotices: an endpoint whose failing notice is out
// (per the notices view) is failing and in outage mode for a dispatcher
// that has just taken it over: more failures send no second notice, a
// success sends recovered.
func TestHealthIsSeededFromNotices(t *testing.T) {
	rs := newReceivers()
	since := time.Unix(1_700_000_000, 0)
	now := since.Add(time.Hour)
	rs.seed = func(id string) (bool, time.Time) { return id == "ep", since }
	rs.seedOutage = true
	for i := range 10 {
		if ev := rs.observe("ep", fmt.Sprint("d", i), false, false, now, 5, 2, 100, 6*time.Hour); ev != healthNone {
			t.Fatalf("failure %d of a seeded failing endpoint: event %v, want none", i+1, ev)
		}
	}
	if g, _ := rs.outageGate("ep", now, 2, time.Minute); g != gateHold {
		t.Fatalf("seeded failing endpoint not in outage mode: gate %v", g)
	}
	if ev := rs.observe("ep", "d", false, false, since.Add(6*time.Hour), 5, 2, 100, 6*time.Hour); ev != healthReminder {
		t.Fatalf("6 h after the seeded notice: event %v, want a reminder", ev)
	}
	if ev := rs.observe("ep", "d", true, false, now, 5, 2, 100, 6*time.Hour); ev != healthRecovered {
		t.Fatalf("success after a seeded outage: event %v, want recovered", ev)
	}
	if g, _ := rs.outageGate("other", now, 1, time.Minute); g != gatePass {
		t.Fatalf("an endpoint the view does not list is gated: %v", g)
	}
	// After a rebalance, health is seeded again; in-flight counts stay.
	rs.admit("other", now, 10, 0, time.Second, time.Time{})
	rs.forgetHealth()
	if g, _ := rs.outageGate("ep", now, 2, time.Minute); g != gateHold {
		t.Fatalf("not re-seeded after forgetHealth: gate %v", g)
	}
	if rs.m["other"].inFlight != 1 {
		t.Fatalf("forgetHealth dropped attempts in flight")
	}
}
