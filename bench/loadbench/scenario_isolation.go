package main

import (
	"context"
	"fmt"
	"time"
)

// isolationRate is the events/s offered to each endpoint.
const isolationRate = 10

// isoResult is what the healthy endpoints got in one isolation run.
type isoResult struct {
	rate    float64 // healthy deliveries/s in the window
	q       quantiles
	missing int
	slowOK  int64 // 2xx answers of the slow endpoints
	hangs   int64 // attempts the hanging endpoints saw (never answered)
	// profiled says where a run's profiles went, if taken.
	profiled string
	// window is what the dispatcher's window held in the measurement
	// window (window.go).
	window windowFigures
}

// runIsolation runs the same 60 healthy endpoints twice: alone, then
// beside 30 slow ones (2xx after 1.8 s with a 2 s attempt timeout, so
// nothing counts them as failing) and 10 that hang until the timeout.
// Every endpoint has default limits and is offered 10 events/s. It
// reports the healthy endpoints' throughput and p99 beside the sick ones
// as a ratio to the run without them.
func runIsolation(ctx context.Context, b *bench) error {
	base, err := isolationRun(ctx, b, "iso-alone", false)
	if err != nil {
		return fmt.Errorf("healthy alone: %w", err)
	}
	sick, err := isolationRun(ctx, b, "iso-sick", true)
	if err != nil {
		return fmt.Errorf("beside sick endpoints: %w", err)
	}
	b.rep.add("healthy alone: deliveries/s · latency", fmt.Sprintf("%.0f/s (offered %d/s) · %s", base.rate, 60*isolationRate, base.q), "")
	b.rep.add("healthy beside sick: deliveries/s · latency", fmt.Sprintf("%.0f/s · %s", sick.rate, sick.q), "")
	b.rep.add("healthy throughput beside sick / alone", "", pct(sick.rate, base.rate)+" (target ≥ 90%)")
	p99Ratio := "n/a"
	if base.q.p99 > 0 {
		p99Ratio = fmt.Sprintf("%.1f×", float64(sick.q.p99)/float64(base.q.p99))
	}
	b.rep.add("healthy p99 beside sick / alone", "", p99Ratio+" (target ≤ 2×)")
	b.rep.add("sick endpoints", fmt.Sprintf("slow answered %d deliveries; hanging saw %d attempts; healthy not delivered within the drain bound: %d alone, %d beside",
		sick.slowOK, sick.hangs, base.missing, sick.missing), "")
	return nil
}

// isolationRun is one run: the healthy endpoints, with or without the sick ones.
func isolationRun(ctx context.Context, b *bench, name string, withSick bool) (isoResult, error) {
	var res isoResult
	_, err := withSession(ctx, b, name, func(ctx context.Context, s *session) error {
		type ep struct {
			group string
			rt    route
		}
		var eps []ep
		for range 60 {
			eps = append(eps, ep{"healthy", route{group: "healthy"}})
		}
		if withSick {
			for range 30 {
				eps = append(eps, ep{"slow", route{group: "slow", kind: answerSlow, delay: 1800 * time.Millisecond}})
			}
			for range 10 {
				eps = append(eps, ep{"hang", route{group: "hang", kind: answerHang}})
			}
		}
		// Interleave so the healthy and sick endpoints' events alternate.
		specs := make([]endpointSpec, len(eps))
		for i, e := range eps {
			specs[i] = endpointSpec{
				url:        s.rcv.handle(fmt.Sprintf("/iso/%d", i), e.rt),
				eventTypes: []string{fmt.Sprintf("bench.iso.%d", i)},
				timeout:    2 * time.Second,
			}
		}
		if _, err := s.h.createEndpoints(ctx, specs); err != nil {
			return err
		}
		log := newPublishLog()
		start := time.Now()
		from, to := start.Add(b.cfg.Warmup), start.Add(b.cfg.Warmup+b.cfg.Window)
		// Endpoint i gets events i, i+n, i+2n, …: each one isolationRate/s.
		n := len(eps)
		paced(ctx, float64(isolationRate*n), b.cfg.Warmup+b.cfg.Window, 1<<40, 1024, func(ctx context.Context, i int, due time.Time) {
			id, _, err := s.h.publish(ctx, fmt.Sprintf("bench.iso.%d", i%n), b.payload)
			if err != nil {
				log.errs.Add(1)
				return
			}
			if eps[i%n].group == "healthy" {
				log.add(id, due)
			}
		})
		var err error
		res, err = isoMeasure(ctx, b, s, log, from, to)
		return err
	})
	return res, err
}

// isoMeasure waits for every healthy event published to arrive (within
// the drain bound) and measures the healthy endpoints' rate and latency
// in [from, to), and what the sick ones (groups "slow" and "hang") saw.
func isoMeasure(ctx context.Context, b *bench, s *session, log *publishLog, from, to time.Time) (isoResult, error) {
	var res isoResult
	if err := drain(ctx, s, "healthy", log.len(), b.cfg.Drain); err != nil {
		return res, err
	}
	ds, miss := log.latencies(s.rcv.arrivals("healthy"), from, to)
	res.q, res.missing = quantilesOf(ds), miss
	res.rate = perSec(s.rcv.uniqueIn("healthy", from, to), b.cfg.Window)
	_, res.slowOK, _ = s.rcv.counts("slow")
	res.hangs = s.rcv.attempts("hang")
	return res, nil
}
