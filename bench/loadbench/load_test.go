package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestClosedLoopStopsAtItsLimit(t *testing.T) {
	var calls atomic.Int64
	n := closedLoop(t.Context(), 8, 100, time.Now().Add(time.Minute), func(context.Context, int) { calls.Add(1) })
	if n != 100 || calls.Load() != 100 {
		t.Errorf("closedLoop started %d, made %d calls; want 100, 100", n, calls.Load())
	}
}

func TestPacedCallsEachIndexOnceUpToItsLimit(t *testing.T) {
	var seen [50]atomic.Int64
	run := paced(t.Context(), 10000, time.Minute, 50, 4, func(_ context.Context, i int, _ time.Time) { seen[i].Add(1) })
	if run.started != 50 {
		t.Errorf("paced started %d, want 50", run.started)
	}
	for i := range seen {
		if n := seen[i].Load(); n != 1 {
			t.Errorf("index %d called %d times, want once", i, n)
		}
	}
}

func TestCreditsBoundWhatIsAhead(t *testing.T) {
	c := newCredits(3)
	if err := c.take(t.Context(), 3); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := c.take(ctx, 1); err == nil {
		t.Fatal("took a fourth credit of three")
	}
	c.give()
	if err := c.take(t.Context(), 1); err != nil {
		t.Errorf("take after give = %v, want nil", err)
	}
}
