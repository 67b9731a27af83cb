package dispatcher

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// queueN puts n entries in l, as place does.
func queueN(f *fair, l *lane, n int, now time.Time) {
	for range n {
		l.push(&entry{rec: &kgo.Record{}, size: 1}, now)
	}
	f.touch(l, now)
	f.ready(l, now)
}

// TestLaneRateNeverExceededAndNothingLostToLateWakeups: a lane offered
// twice its rate, woken up to 3 ms late each time (timers are not
// exact), starts at its rate within 1%, and no 1 s window holds more
// than rate + burst.
func TestLaneRateNeverExceededAndNothingLostToLateWakeups(t *testing.T) {
	for _, perSec := range []float64{5, 100, 1000} {
		t.Run(fmt.Sprint(perSec), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(1, 2))
			start := time.Unix(1_700_000_000, 0)
			l := newLane("ep", &tenant{})
			l.configure(1_000_000, perSec, start)
			burst := l.lim.Burst()
			var starts []time.Time
			now := start
			end := start.Add(20 * time.Second)
			for now.Before(end) {
				ok, at := l.rateReady(now)
				if !ok {
					now = at.Add(time.Duration(rnd.Int64N(int64(3 * time.Millisecond))))
					continue
				}
				l.take(now)
				starts = append(starts, now)
			}
			j := 0
			for i := range starts {
				for j < len(starts) && starts[j].Sub(starts[i]) < time.Second {
					j++
				}
				if n := j - i; float64(n) > perSec+float64(burst) {
					t.Fatalf("%d starts within 1 s from +%v (rate %v/s, burst %d)", n, starts[i].Sub(start), perSec, burst)
				}
			}
			if want := perSec * 20 * 0.99; float64(len(starts)) < want {
				t.Fatalf("%d starts in 20 s, want at least %.0f (rate %v/s): late wake-ups lost throughput", len(starts), want, perSec)
			}
		})
	}
}

// TestFairSharesTenantsFirstThenEndpoints: with a budget of ten
// attempts, a tenant with twenty runnable endpoints and a tenant with one
// get five each; within the first tenant, its endpoints take turns.
func TestFairSharesTenantsFirstThenEndpoints(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	f := newFair(10 * attemptOverhead)
	for i := range 20 {
		l := f.lane(fmt.Sprint("a", i), "big")
		l.configure(100, 0, now)
		queueN(f, l, 100, now)
	}
	small := f.lane("b0", "small")
	small.configure(100, 0, now)
	queueN(f, small, 100, now)

	perTenant := map[string]int{}
	perLane := map[string]int{}
	for {
		l := f.next()
		if l == nil {
			break
		}
		l.pop()
		f.charge(l, attemptOverhead)
		f.touch(l, now)
		perTenant[l.tenant.id]++
		perLane[l.id]++
		f.requeue(l, now)
	}
	if perTenant["big"] != 5 || perTenant["small"] != 5 {
		t.Fatalf("attempts per tenant %v, want 5 each", perTenant)
	}
	for id, n := range perLane {
		if id != "b0" && n > 1 {
			t.Fatalf("endpoint %s got %d of its tenant's 5 while 19 others waited", id, n)
		}
	}
}

// TestFairIsWorkConservingAndCapExact: a tenant alone may use the whole
// budget; each lane stops at its cap and comes back when an attempt
// ends.
func TestFairIsWorkConservingAndCapExact(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	f := newFair(100 * attemptOverhead)
	lanes := make([]*lane, 4)
	for i := range lanes {
		lanes[i] = f.lane(fmt.Sprint("e", i), "only")
		lanes[i].configure(7, 0, now)
		queueN(f, lanes[i], 50, now)
	}
	started := 0
	for l := f.next(); l != nil; l = f.next() {
		l.pop()
		f.charge(l, attemptOverhead)
		f.touch(l, now)
		started++
		f.requeue(l, now)
	}
	if started != 28 {
		t.Fatalf("%d started, want 4 endpoints × cap 7 = 28", started)
	}
	for _, l := range lanes {
		if l.inFlight != 7 {
			t.Fatalf("%s has %d in flight, cap 7", l.id, l.inFlight)
		}
	}
	f.uncharge(lanes[2], attemptOverhead)
	f.requeue(lanes[2], now)
	if l := f.next(); l != lanes[2] {
		t.Fatalf("after one of e2's attempts ended, next = %v, want e2", l)
	}
}

// TestRateHeldLaneWakesAtItsTime: a lane out of tokens leaves the rings
// for the wake heap and is runnable again exactly when its rate allows.
func TestRateHeldLaneWakesAtItsTime(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	f := newFair(100 * attemptOverhead)
	l := f.lane("e", "t")
	l.configure(100, 10, now) // burst 1
	queueN(f, l, 5, now)
	if got := f.next(); got != l {
		t.Fatal("a fresh lane is not runnable")
	}
	l.pop()
	l.take(now)
	f.charge(l, attemptOverhead)
	f.requeue(l, now)
	if got := f.next(); got != nil {
		t.Fatal("a lane out of tokens is runnable")
	}
	if at := f.nextWake(); !at.Equal(now.Add(100 * time.Millisecond)) {
		t.Fatalf("wake at +%v, want +100ms", at.Sub(now))
	}
	f.wake(now.Add(99 * time.Millisecond))
	if got := f.next(); got != nil {
		t.Fatal("woken early")
	}
	f.wake(now.Add(100 * time.Millisecond))
	if got := f.next(); got != l {
		t.Fatal("not woken at its time")
	}
}

// TestSpilledDeliveriesComeBackSpacedAtTheLanesPace: deliveries spilled
// from one lane are due one lane interval apart, after what waits ahead.
func TestSpilledDeliveriesComeBackSpacedAtTheLanesPace(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	l := newLane("e", &tenant{})
	l.configure(10, 100, now)
	first := l.spillDue(now, 3000, time.Second)
	if want := now.Add(30 * time.Second); !first.Equal(want) {
		t.Fatalf("first spilled due +%v, want +30s (3,000 ahead at 100/s)", first.Sub(now))
	}
	second := l.spillDue(now, 3000, time.Second)
	if d := second.Sub(first); d != 10*time.Millisecond {
		t.Fatalf("spilled deliveries %v apart, want 10ms", d)
	}
	// A lane bound by its cap drains at cap/latency.
	slow := newLane("s", &tenant{})
	slow.configure(10, 100, now)
	slow.observe(2 * time.Second)
	if got := slow.interval(); got != 200*time.Millisecond {
		t.Fatalf("interval of a cap-bound lane %v, want 200ms (10 in flight, 2 s each)", got)
	}
}
