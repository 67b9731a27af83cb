package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// pacedRun says how an open-loop run went: calls started and how late the
// last one started against its schedule (non-zero when the callers could
// not keep up and the schedule slipped).
type pacedRun struct {
	started int
	slip    time.Duration
	elapsed time.Duration
}

// paced starts fn(ctx, i, due) at rate per second for d, at most limit
// times, each call in its own goroutine with at most conc in flight
// (open loop: due is when the call was meant to start, so a stalled
// system cannot hide its latency by slowing the load). It returns when
// every call has returned.
func paced(ctx context.Context, rate float64, d time.Duration, limit, conc int, fn func(ctx context.Context, i int, due time.Time)) pacedRun {
	start := time.Now()
	end := start.Add(d)
	dueOf := func(i int) time.Time { return start.Add(time.Duration(float64(i) / rate * float64(time.Second))) }
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	var run pacedRun
	i := 0
loop:
	for i < limit && dueOf(i).Before(end) {
		now := time.Now()
		for ; i < limit && !dueOf(i).After(now) && dueOf(i).Before(end); i++ {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				break loop
			}
			n, due := i, dueOf(i) // i moves on before the call starts
			run.slip = max(run.slip, time.Since(due))
			wg.Go(func() {
				defer func() { <-sem }()
				fn(ctx, n, due)
			})
		}
		select {
		case <-ctx.Done():
			break loop
		case <-tick.C:
		}
	}
	wg.Wait()
	run.started = i
	run.elapsed = time.Since(start)
	return run
}

// closedLoop runs conc workers that call fn(ctx, i) back to back until
// limit calls have started or until ends, and returns the number started.
func closedLoop(ctx context.Context, conc, limit int, until time.Time, fn func(ctx context.Context, i int)) int {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(until) {
				i := int(next.Add(1)) - 1
				if i >= limit {
					return
				}
				fn(ctx, i)
			}
		})
	}
	wg.Wait()
	return int(min(next.Load(), int64(limit)))
}

// credits bounds how far publishing may run ahead of delivery: a publish
// takes one credit per delivery it will make, each arrival returns one.
// Safe for concurrent use.
type credits chan struct{}

func newCredits(n int) credits { return make(credits, n) }

// take blocks until n credits are free or ctx ends.
func (c credits) take(ctx context.Context, n int) error {
	for range n {
		select {
		case c <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// give returns one credit; extra returns (duplicates) are ignored.
func (c credits) give() {
	select {
	case <-c:
	default:
	}
}
