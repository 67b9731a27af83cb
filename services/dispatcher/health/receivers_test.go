package health

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestObserveTellsOncePerOutageRemindsAndRecovers(t *testing.T) {
	rs := New(nil, false)
	now := time.Unix(1_700_000_000, 0)
	th := Thresholds{FailingAfter: 5, OutageAfter: 2, AutoPauseAfter: 3, RemindEvery: 6 * time.Hour}
	var events []Event
	fail := func(d string, permanent bool) {
		events = append(events, rs.Observe("ep", d, false, permanent, now, th))
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
	want := []Event{None, None, None, None, Failing}
	for range 10 {
		want = append(want, None)
	}
	want = append(want, Reminder, None)
	if !slices.Equal(events, want) {
		t.Fatalf("events %v, want %v", events, want)
	}
	if ev := rs.Observe("ep", "dlv8", true, false, now, th); ev != Recovered {
		t.Fatalf("first success after an outage: %v, want recovered", ev)
	}
	if ev := rs.Observe("ep", "dlv9", true, false, now, th); ev != None {
		t.Fatalf("second success: %v, want nothing", ev)
	}
	// Three permanent failures in a row pause the endpoint, once.
	var got []Event
	for i := range 4 {
		got = append(got, rs.Observe("ep", fmt.Sprint("p", i), false, true, now, th))
	}
	if !slices.Equal(got, []Event{None, None, AutoPause, None}) {
		t.Fatalf("permanent streak events %v", got)
	}
}

// outageAfterTwo is the thresholds of the outage mode tests: outage
// mode after two distinct deliveries, no automatic pause, no reminders.
var outageAfterTwo = Thresholds{FailingAfter: 5, OutageAfter: 2}

func TestOutageModeStartsAfterDistinctDeliveriesAndProbesOneAtATime(t *testing.T) {
	rs := New(nil, false)
	now := time.Unix(1_700_000_000, 0)
	rs.Observe("ep", "a", false, false, now, outageAfterTwo)
	rs.Observe("ep", "a", false, false, now, outageAfterTwo) // same delivery again: not yet
	if g, _ := rs.OutageGate("ep", now, true, time.Minute); g != Pass {
		t.Fatalf("one failing delivery must not start outage mode, got %v", g)
	}
	rs.Observe("ep", "b", false, false, now, outageAfterTwo)
	if g, _ := rs.OutageGate("ep", now, true, time.Minute); g != Probe {
		t.Fatalf("first delivery in an outage: %v, want the probe", g)
	}
	if g, until := rs.OutageGate("ep", now, true, time.Minute); g != Hold || !until.Equal(now.Add(time.Minute)) {
		t.Fatalf("while a probe is out: %v until %v, want hold for the recheck", g, until)
	}
	rs.probed("ep", now, func(int) time.Duration { return 30 * time.Second })
	if g, until := rs.OutageGate("ep", now, true, time.Minute); g != Hold || !until.Equal(now.Add(30*time.Second)) {
		t.Fatalf("after a failed probe: %v until %v, want hold until the next probe", g, until)
	}
	if g, _ := rs.OutageGate("ep", now.Add(30*time.Second), false, time.Minute); g != Hold {
		t.Fatal("a delivery attempted before must not be the probe")
	}
	rs.Observe("ep", "c", true, false, now, outageAfterTwo)
	if g, _ := rs.OutageGate("ep", now, false, time.Minute); g != Pass {
		t.Fatal("a success ends outage mode")
	}
}

// TestHealthIsSeededFromNotices: an endpoint whose failing notice is out
// (per the notices view) is failing and in outage mode for a dispatcher
// that has just taken it over: more failures send no second notice, a
// success sends recovered.
func TestHealthIsSeededFromNotices(t *testing.T) {
	since := time.Unix(1_700_000_000, 0)
	now := since.Add(time.Hour)
	rs := New(func(id string) (bool, time.Time, bool) { return id == "ep", since, true }, true)
	th := Thresholds{FailingAfter: 5, OutageAfter: 2, AutoPauseAfter: 100, RemindEvery: 6 * time.Hour}
	for i := range 10 {
		if ev := rs.Observe("ep", fmt.Sprint("d", i), false, false, now, th); ev != None {
			t.Fatalf("failure %d of a seeded failing endpoint: event %v, want none", i+1, ev)
		}
	}
	if g, _ := rs.OutageGate("ep", now, false, time.Minute); g != Hold {
		t.Fatalf("seeded failing endpoint not in outage mode: gate %v", g)
	}
	if ev := rs.Observe("ep", "d", false, false, since.Add(6*time.Hour), th); ev != Reminder {
		t.Fatalf("6 h after the seeded notice: event %v, want a reminder", ev)
	}
	if ev := rs.Observe("ep", "d", true, false, now, th); ev != Recovered {
		t.Fatalf("success after a seeded outage: event %v, want recovered", ev)
	}
	if g, _ := rs.OutageGate("other", now, true, time.Minute); g != Pass {
		t.Fatalf("an endpoint the view does not list is gated: %v", g)
	}
	// After its partition is assigned again, health is seeded again.
	rs.Forget(map[int32]bool{0: true})
	if g, _ := rs.OutageGate("ep", now, false, time.Minute); g != Hold {
		t.Fatalf("not re-seeded after Forget: gate %v", g)
	}
}

// TestAnOutageAlwaysHasAProbe: an endpoint in outage mode whose pending
// deliveries are all retries gets a probe one recheck after the probe
// fell due; before, only a first attempt could probe and such an
// endpoint held its deliveries for ever.
func TestAnOutageAlwaysHasAProbe(t *testing.T) {
	rs := New(nil, false)
	now := time.Unix(1_700_000_000, 0)
	recheck := 2 * time.Minute
	rs.Observe("ep", "a", false, false, now, outageAfterTwo)
	rs.Observe("ep", "b", false, false, now, outageAfterTwo)
	g, until := rs.OutageGate("ep", now, false, recheck)
	if g != Hold || !until.Equal(now.Add(recheck)) {
		t.Fatalf("a retry when the outage begins: %v until %v; want held for a recheck (a first attempt is preferred)", g, until)
	}
	if g, _ := rs.OutageGate("ep", until, false, recheck); g != Probe {
		t.Fatalf("a retry a recheck after the probe fell due, no first attempt seen: %v, want the probe", g)
	}
	if g, _ := rs.OutageGate("ep", until, true, recheck); g != Hold {
		t.Fatalf("while the probe is out: %v, want hold", g)
	}
	rs.probed("ep", until, func(int) time.Duration { return time.Minute })
	if g, at := rs.OutageGate("ep", until, false, recheck); g != Hold || !at.Equal(until.Add(time.Minute)) {
		t.Fatalf("after a failed probe: %v until %v, want hold until the next probe", g, at)
	}
}

// TestHealthSurvivesAnAssignmentOfOtherPartitions: an assignment drops
// the health of the endpoints of the partitions assigned, not of the
// others; a probe in flight is not forgotten (no second probe starts).
func TestHealthSurvivesAnAssignmentOfOtherPartitions(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	// The notices view says "kept" is failing (its notice is out).
	rs := New(func(id string) (bool, time.Time, bool) { return id == "kept", now, true }, true)
	for _, id := range []string{"kept", "moved"} {
		rs.Observe(id, "a", false, false, now, outageAfterTwo)
		rs.Observe(id, "b", false, false, now, outageAfterTwo)
	}
	rs.Home("kept", 0)
	rs.Home("moved", 1)
	if g, _ := rs.OutageGate("kept", now, true, time.Minute); g != Probe {
		t.Fatal("no probe")
	}
	rs.Forget(map[int32]bool{1: true})
	if g, _ := rs.OutageGate("kept", now, true, time.Minute); g != Hold {
		t.Fatalf("endpoint of a kept partition after an assignment: %v, want still in outage with its probe out", g)
	}
	if g, _ := rs.OutageGate("moved", now, true, time.Minute); g != Pass {
		t.Fatalf("endpoint of an assigned partition: %v, want its health seeded again (none in the view)", g)
	}
	rs.Forget(map[int32]bool{0: true})
	if g, _ := rs.OutageGate("kept", now, true, time.Minute); g != Hold {
		t.Fatalf("probe in flight forgotten: gate %v, want hold while it is out", g)
	}
}
