package dispatcher

import (
	"testing"
	"time"
)

// TestASlowEndpointKeepsInMemoryWhatItsPaceTakesInQueueTime: an
// endpoint's backlog budget is --queue-time at the pace it really goes —
// its rate limit, or its cap's share of its attempts' latency, whichever
// is slower — not at its rate limit alone. An endpoint answering after
// 9 s with a cap of 10 takes 1.1 deliveries/s; at its default rate limit
// (100/s) it was let keep 3,000 in memory, 45 minutes of them, each
// holding its partition's watermark and splitting the offsets committed
// above it (issue 26: healthy endpoints beside slow ones at 25–28% of
// their rate alone). Now it keeps 30 s of them and spills the rest, due
// when its pace allows; a fast endpoint keeps its budget.
func TestASlowEndpointKeepsInMemoryWhatItsPaceTakesInQueueTime(t *testing.T) {
	tests := []struct {
		name    string
		perSec  float64
		latency time.Duration
		want    int
	}{
		{"answering after 9 s, cap 10", 100, 9 * time.Second, 33},           // 30 s / (9 s / 10)
		{"answering after 50 ms, cap 10", 100, 50 * time.Millisecond, 1000}, // what was polled: under 3,000 (30 s at 100/s)
		{"answering after 100 s, cap 10", 100, 100 * time.Second, 10},       // never fewer than its cap
		{"no rate limit, answering after 9 s", 0, 9 * time.Second, 33},      // the window alone bounded it
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestService(t)
			s.cfg.RateLimit = tt.perSec
			countingEndpoint(t, s)
			e := testEngine(t, s)
			e.pollN(t, 0, 0, 1)
			l := e.f.lanes["ep_1"]
			if l == nil || l.cap != 10 || l.perSec != tt.perSec {
				t.Fatalf("lane %+v; want ep_1's with cap 10 and %v/s", l, tt.perSec)
			}
			l.observe(tt.latency)
			e.pollN(t, 0, 1, 999) // not pumped: nothing starts
			if l.queued != tt.want {
				t.Fatalf("%d deliveries wait in memory; want %d", l.queued, tt.want)
			}
			if e.w.done != 1000-tt.want {
				t.Fatalf("%d deliveries spilled; want %d", e.w.done, 1000-tt.want)
			}
		})
	}
}
