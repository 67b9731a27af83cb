package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// publishLog remembers when each published event was meant to be
// published, by event id (the webhook-id receivers see). Safe for
// concurrent use.
type publishLog struct {
	mu   sync.Mutex
	due  map[string]time.Time
	errs atomic.Int64
}

func newPublishLog() *publishLog { return &publishLog{due: map[string]time.Time{}} }

func (p *publishLog) add(id string, due time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.due[id] = due
}

func (p *publishLog) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.due)
}

// latencies joins the log with first arrivals by webhook-id: publish →
// receiver for every event due in [from, to), and how many of those never
// arrived.
func (p *publishLog) latencies(arrived map[string]time.Time, from, to time.Time) (ds []time.Duration, missing int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, due := range p.due {
		if due.Before(from) || !due.Before(to) {
			continue
		}
		at, ok := arrived[id]
		if !ok {
			missing++
			continue
		}
		ds = append(ds, at.Sub(due))
	}
	return ds, missing
}

// liftedFanout1 creates n endpoints with limits lifted, each receiving its
// own event type prefix+i, so an event of that type has fan-out 1.
func liftedFanout1(ctx context.Context, s *session, group, prefix string, n int) error {
	specs := make([]endpointSpec, n)
	for i := range specs {
		specs[i] = endpointSpec{
			url:         s.rcv.handle(fmt.Sprintf("/%s/%d", group, i), route{group: group}),
			eventTypes:  []string{fmt.Sprintf("%s%d", prefix, i)},
			maxInFlight: 64, rate: 100000,
		}
	}
	_, err := s.h.createEndpoints(ctx, specs)
	return err
}

// drain waits up to d for every logged event of group to arrive; running
// out of time is not an error (the events are counted as missing).
func drain(ctx context.Context, s *session, group string, n int, d time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := s.rcv.waitUnique(wctx, group, int64(n))
	if errors.Is(err, errTimeout) && ctx.Err() == nil {
		return nil
	}
	return err
}

// runLatency publishes 2,000 events/s (open loop) to 10 endpoints with
// limits lifted, fan-out 1, and reports publish → receiver latency of the
// events meant to be published inside the window.
func runLatency(ctx context.Context, b *bench) error {
	const rate = 2000
	var q quantiles
	var missing int
	var run pacedRun
	var pubErrs int64
	_, err := withSession(ctx, b, "latency", func(ctx context.Context, s *session) error {
		if err := liftedFanout1(ctx, s, "lat", "bench.lat.", 10); err != nil {
			return err
		}
		log := newPublishLog()
		start := time.Now()
		from, to := start.Add(b.cfg.Warmup), start.Add(b.cfg.Warmup+b.cfg.Window)
		run = paced(ctx, rate, b.cfg.Warmup+b.cfg.Window, 1<<40, 1024, func(ctx context.Context, i int, due time.Time) {
			id, _, err := s.h.publish(ctx, fmt.Sprintf("bench.lat.%d", i%10), b.payload)
			if err != nil {
				log.errs.Add(1)
				return
			}
			log.add(id, due)
		})
		if err := drain(ctx, s, "lat", log.len(), b.cfg.Drain); err != nil {
			return err
		}
		ds, miss := log.latencies(s.rcv.arrivals("lat"), from, to)
		q, missing, pubErrs = quantilesOf(ds), miss, log.errs.Load()
		return nil
	})
	if err != nil {
		return err
	}
	b.rep.add("publish → receiver", q.String(), "target p99 ≤ 50 ms")
	b.rep.add("offered", fmt.Sprintf("%.0f events/s to 10 endpoints (limits lifted); publishing fell behind by %s", float64(run.started)/run.elapsed.Seconds(), ms(run.slip)), "")
	if missing > 0 || pubErrs > 0 {
		b.rep.add("not delivered within the drain bound after the load / publish errors", fmt.Sprintf("%d / %d", missing, pubErrs), "")
	}
	return nil
}

// runIngest measures PublishEvent from the producer's side, fan-out 1 to
// 10 endpoints with limits lifted: first its latency at a paced 2,000/s,
// then the most calls/s that 2 × cfg.Publishers concurrent callers get
// through. The dispatcher delivers what is published meanwhile, on the
// same cores.
func runIngest(ctx context.Context, b *bench) error {
	const rate = 2000
	var paceQ, maxQ quantiles
	var maxRate float64
	var errsA, errsB int64
	conc := 2 * b.cfg.Publishers
	_, err := withSession(ctx, b, "ingest", func(ctx context.Context, s *session) error {
		if err := liftedFanout1(ctx, s, "ingest", "bench.ingest.", 10); err != nil {
			return err
		}
		var mu sync.Mutex
		var ds []time.Duration
		var errs atomic.Int64
		start := time.Now()
		from, to := start.Add(b.cfg.Warmup), start.Add(b.cfg.Warmup+b.cfg.Window)
		paced(ctx, rate, b.cfg.Warmup+b.cfg.Window, 1<<40, 1024, func(ctx context.Context, i int, due time.Time) {
			_, _, err := s.h.publish(ctx, fmt.Sprintf("bench.ingest.%d", i%10), b.payload)
			if err != nil {
				errs.Add(1)
				return
			}
			if !due.Before(from) && due.Before(to) {
				mu.Lock()
				ds = append(ds, time.Since(due))
				mu.Unlock()
			}
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		paceQ, errsA = quantilesOf(ds), errs.Swap(0)

		ds = nil
		var done atomic.Int64
		start = time.Now()
		from, to = start.Add(b.cfg.Warmup), start.Add(b.cfg.Warmup+b.cfg.Window)
		closedLoop(ctx, conc, 1<<40, to, func(ctx context.Context, i int) {
			t0 := time.Now()
			_, _, err := s.h.publish(ctx, fmt.Sprintf("bench.ingest.%d", i%10), b.payload)
			end := time.Now()
			if err != nil {
				errs.Add(1)
				return
			}
			if !t0.Before(from) && end.Before(to) {
				done.Add(1)
				mu.Lock()
				ds = append(ds, end.Sub(t0))
				mu.Unlock()
			}
		})
		maxQ, errsB = quantilesOf(ds), errs.Load()
		maxRate = perSec(done.Load(), b.cfg.Window)
		return ctx.Err()
	})
	if err != nil {
		return err
	}
	b.rep.add("PublishEvent/s, as fast as possible", fmt.Sprintf("%.0f/s (%d callers; call %s)", maxRate, conc, maxQ), "target ≥ 5,000/s")
	b.rep.add("PublishEvent latency at 2,000/s", paceQ.String(), "target p99 ≤ 50 ms")
	if errsA+errsB > 0 {
		b.rep.add("publish errors (paced / max)", fmt.Sprintf("%d / %d", errsA, errsB), "")
	}
	return nil
}
