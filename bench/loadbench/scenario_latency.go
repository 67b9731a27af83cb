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

// runIngest measures PublishEvent from the producer's side, limits
// lifted: first its latency at a paced 2,000/s, fan-out 1 to 10
// endpoints; then the most calls/s that 2 × cfg.Publishers concurrent
// callers get through at fan-out 1; then the most that cfg.Publishers
// callers get through at fan-out 10 (one event type, 10 endpoints). The
// dispatcher delivers what is published meanwhile, on the same cores.
// With --profile-dir, each closed-loop window also takes a CPU profile
// and an allocation profile of the Hookline process.
func runIngest(ctx context.Context, b *bench) error {
	const rate = 2000
	var paceQ quantiles
	var max1, max10 closedRun
	var errsA int64
	_, err := withSession(ctx, b, "ingest", func(ctx context.Context, s *session) error {
		if err := liftedFanout1(ctx, s, "ingest", "bench.ingest.", 10); err != nil {
			return err
		}
		if err := liftedFanout(ctx, s, "ingest10", "bench.ingest10", 10); err != nil {
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
		paceQ, errsA = quantilesOf(ds), errs.Load()

		max1 = maxPublish(ctx, b, s, 2*b.cfg.Publishers, "fanout1", func(i int) string { return fmt.Sprintf("bench.ingest.%d", i%10) })
		if ctx.Err() != nil {
			return ctx.Err()
		}
		max10 = maxPublish(ctx, b, s, b.cfg.Publishers, "fanout10", func(int) string { return "bench.ingest10" })
		return ctx.Err()
	})
	if err != nil {
		return err
	}
	b.rep.addFigure("PublishEvent/s, as fast as possible", max1.rate, rateCell, fmt.Sprintf("(%d callers; call %s)", 2*b.cfg.Publishers, max1.q), func(float64) string { return "target ≥ 10,000/s" })
	b.rep.addFigure("PublishEvent p99 at 2,000/s", float64(paceQ.p99)/float64(time.Millisecond), func(v float64) string { return fmt.Sprintf("%.1f ms", v) },
		"("+paceQ.String()+")", func(float64) string { return "target p99 ≤ 50 ms" })
	b.rep.addFigure("PublishEvent/s at fan-out 10, as fast as possible", max10.rate, func(v float64) string { return fmt.Sprintf("%.0f/s = %.0f delivery records/s", v, 10*v) },
		fmt.Sprintf("(%d callers; call %s)", b.cfg.Publishers, max10.q), func(float64) string { return "target ≥ 2,500/s" })
	if errsA+max1.errs+max10.errs > 0 {
		b.rep.add("publish errors (paced / max fan-out 1 / max fan-out 10)", fmt.Sprintf("%d / %d / %d", errsA, max1.errs, max10.errs), "")
	}
	for _, p := range []string{max1.profiled, max10.profiled} {
		if p != "" {
			b.rep.add("profiles", p, "")
		}
	}
	return nil
}

// liftedFanout creates n endpoints with limits lifted, all receiving
// eventType, so an event of that type has fan-out n.
func liftedFanout(ctx context.Context, s *session, group, eventType string, n int) error {
	specs := make([]endpointSpec, n)
	for i := range specs {
		specs[i] = endpointSpec{
			url:         s.rcv.handle(fmt.Sprintf("/%s/%d", group, i), route{group: group}),
			eventTypes:  []string{eventType},
			maxInFlight: 64, rate: 100000,
		}
	}
	_, err := s.h.createEndpoints(ctx, specs)
	return err
}

// closedRun is what a closed-loop publishing run measured.
type closedRun struct {
	rate     float64 // calls/s answered OK inside the window
	q        quantiles
	errs     int64
	profiled string // where its profiles went, if taken
}

// maxPublish publishes back to back from conc callers for warm-up +
// window (eventType(i) names call i's type) and measures the calls that
// started and ended inside the window. With --profile-dir it takes the
// profiles of name meanwhile.
func maxPublish(ctx context.Context, b *bench, s *session, conc int, name string, eventType func(i int) string) closedRun {
	var mu sync.Mutex
	var ds []time.Duration
	var done, errs atomic.Int64
	start := time.Now()
	from, to := start.Add(b.cfg.Warmup), start.Add(b.cfg.Warmup+b.cfg.Window)
	prof := startProfiles(ctx, b.cfg, name, from, b.cfg.Window)
	closedLoop(ctx, conc, 1<<40, to, func(ctx context.Context, i int) {
		t0 := time.Now()
		_, _, err := s.h.publish(ctx, eventType(i), b.payload)
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
	return closedRun{rate: perSec(done.Load(), b.cfg.Window), q: quantilesOf(ds), errs: errs.Load(), profiled: prof()}
}
