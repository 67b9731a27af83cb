package dispatcher

import (
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
