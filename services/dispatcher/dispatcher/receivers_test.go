package dispatcher

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

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
	if g, _ := rs.outageGate("ep", now, true, time.Minute); g != gatePass {
		t.Fatalf("one failing delivery must not start outage mode, got %v", g)
	}
	rs.observe("ep", "b", false, false, now, 5, 2, 0, 0)
	if g, _ := rs.outageGate("ep", now, true, time.Minute); g != gateProbe {
		t.Fatalf("first delivery in an outage: %v, want the probe", g)
	}
	if g, until := rs.outageGate("ep", now, true, time.Minute); g != gateHold || !until.Equal(now.Add(time.Minute)) {
		t.Fatalf("while a probe is out: %v until %v, want hold for the recheck", g, until)
	}
	rs.probed("ep", now, func(int) time.Duration { return 30 * time.Second })
	if g, until := rs.outageGate("ep", now, true, time.Minute); g != gateHold || !until.Equal(now.Add(30*time.Second)) {
		t.Fatalf("after a failed probe: %v until %v, want hold until the next probe", g, until)
	}
	if g, _ := rs.outageGate("ep", now.Add(30*time.Second), false, time.Minute); g != gateHold {
		t.Fatal("a delivery attempted before must not be the probe")
	}
	rs.observe("ep", "c", true, false, now, 5, 2, 0, 0)
	if g, _ := rs.outageGate("ep", now, false, time.Minute); g != gatePass {
		t.Fatal("a success ends outage mode")
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
	rs.seed = func(id string) (bool, time.Time, bool) { return id == "ep", since, true }
	rs.seedOutage = true
	for i := range 10 {
		if ev := rs.observe("ep", fmt.Sprint("d", i), false, false, now, 5, 2, 100, 6*time.Hour); ev != healthNone {
			t.Fatalf("failure %d of a seeded failing endpoint: event %v, want none", i+1, ev)
		}
	}
	if g, _ := rs.outageGate("ep", now, false, time.Minute); g != gateHold {
		t.Fatalf("seeded failing endpoint not in outage mode: gate %v", g)
	}
	if ev := rs.observe("ep", "d", false, false, since.Add(6*time.Hour), 5, 2, 100, 6*time.Hour); ev != healthReminder {
		t.Fatalf("6 h after the seeded notice: event %v, want a reminder", ev)
	}
	if ev := rs.observe("ep", "d", true, false, now, 5, 2, 100, 6*time.Hour); ev != healthRecovered {
		t.Fatalf("success after a seeded outage: event %v, want recovered", ev)
	}
	if g, _ := rs.outageGate("other", now, true, time.Minute); g != gatePass {
		t.Fatalf("an endpoint the view does not list is gated: %v", g)
	}
	// After its partition is assigned again, health is seeded again.
	rs.forget(map[int32]bool{0: true})
	if g, _ := rs.outageGate("ep", now, false, time.Minute); g != gateHold {
		t.Fatalf("not re-seeded after forgetHealth: gate %v", g)
	}
}
