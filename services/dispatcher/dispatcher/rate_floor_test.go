package dispatcher

import (
	"math"
	"testing"
	"time"
)

// TestATinyRateWaitsItsSpacingInsteadOfOverflowing: an endpoint record
// with a positive rate far below the floor (written before ingest refused
// one, or by a topic writer) is held to the floor's spacing. On main the
// wait 1/1e-12 s overflowed time.Duration to MinInt64, so the lane woke
// every millisecond and never started anything.
func TestATinyRateWaitsItsSpacingInsteadOfOverflowing(t *testing.T) {
	for _, perSec := range []float64{1e-12, math.SmallestNonzeroFloat64, 1e-300} {
		now := time.Unix(1_700_000_000, 0)
		l := newLane("ep", &tenant{})
		l.configure(10, perSec, now)
		if ok, _ := l.rateReady(now); !ok {
			t.Fatalf("rate %v: the first start (the burst) was refused", perSec)
		}
		l.take(now)
		ok, at := l.rateReady(now)
		if ok {
			t.Fatalf("rate %v: a second start allowed at once", perSec)
		}
		const spacing = 1000 * time.Second // 1 / endpoints.RateLimitFloor (0.001/s)
		if got := at.Sub(now); got < spacing-time.Millisecond || got > spacing+time.Millisecond {
			t.Fatalf("rate %v: next start in %v, want the floor's spacing %v", perSec, got, spacing)
		}
		if ok, _ := l.rateReady(at); !ok {
			t.Fatalf("rate %v: no start allowed at the wake-up time %v", perSec, at.Sub(now))
		}
		if d := l.interval(); d != spacing {
			t.Fatalf("rate %v: interval %v, want %v", perSec, d, spacing)
		}
		if due := l.spillDue(now, math.MaxInt32, 0); due.Before(now) {
			t.Fatalf("rate %v: a spilled delivery is due in the past (%v)", perSec, due.Sub(now))
		}
	}
}
