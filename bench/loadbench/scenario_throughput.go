package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// defaultRate is the dispatcher's default attempts per second per
// endpoint (bin/dispatcher --rate-limit), the bound of the default-limits
// scenario.
const defaultRate = 100

// runLifted measures deliveries/s end to end with limits out of the way:
// 100 endpoints (max_in_flight 64, 100,000/s), each event fanned out to
// 10 of them by event type. Publishing runs as fast as cfg.Publishers
// callers go, but never more than cfg.PublishCap deliveries ahead of what
// has arrived, so the figure is steady-state delivery, not a queue
// filling up.
func runLifted(ctx context.Context, b *bench) error {
	const endpoints, fanout = 100, 10
	var rate float64
	var kafkaPer float64
	var pubErrs int64
	mem, err := withSession(ctx, b, "lifted", func(ctx context.Context, s *session) error {
		specs := make([]endpointSpec, endpoints)
		for i := range specs {
			specs[i] = endpointSpec{
				url:         s.rcv.handle(fmt.Sprintf("/lifted/%d", i), route{group: "lifted"}),
				eventTypes:  []string{fmt.Sprintf("bench.lifted.g%d", i%(endpoints/fanout))},
				maxInFlight: 64, rate: 100000,
			}
		}
		if _, err := s.h.createEndpoints(ctx, specs); err != nil {
			return err
		}
		cr := newCredits(b.cfg.PublishCap)
		s.rcv.notify(func(g string) {
			if g == "lifted" {
				cr.give()
			}
		})
		var errs atomic.Int64
		start := time.Now()
		from, to := start.Add(b.cfg.Warmup), start.Add(b.cfg.Warmup+b.cfg.Window)
		before := s.kafka.snapshotAt(ctx, from)
		closedLoop(ctx, b.cfg.Publishers, 1<<40, to, func(ctx context.Context, i int) {
			if cr.take(ctx, fanout) != nil {
				return
			}
			if _, n, err := s.h.publish(ctx, fmt.Sprintf("bench.lifted.g%d", i%(endpoints/fanout)), b.payload); err != nil || n != fanout {
				errs.Add(1)
				for range fanout {
					cr.give()
				}
			}
		})
		w0, err := before()
		if err != nil {
			return err
		}
		after, err := s.kafka.snapshot(ctx)
		if err != nil {
			return err
		}
		n := s.rcv.uniqueIn("lifted", from, to)
		rate = perSec(n, b.cfg.Window)
		if n > 0 {
			kafkaPer = float64(after.minus(w0).records) / float64(n)
		}
		pubErrs = errs.Load()
		return nil
	})
	if err != nil {
		return err
	}
	b.rep.addFigure("deliveries/s (steady state)", rate, rateCell, "", func(v float64) string { return pct(v, b.ceiling) + " of ceiling (target ≥ 35%)" })
	b.rep.addFigure("Kafka records written per delivery", kafkaPer, oneDecimal, "", nil)
	b.rep.add("RSS at end", memoryLine(mem), "")
	if pubErrs > 0 {
		b.rep.add("publish errors", fmt.Sprint(pubErrs), "")
	}
	return nil
}

// oneDecimal formats a ratio such as records per delivery.
func oneDecimal(v float64) string { return fmt.Sprintf("%.1f", v) }

// runDefault offers 110% of the sum of 10 default endpoints' rate limits
// (10 × 100/s) for the warm-up and the window, one event per endpoint in
// turn, and reports what was delivered as a share of that sum, and how
// many Kafka records Hookline wrote per delivery in the window.
func runDefault(ctx context.Context, b *bench) error {
	const endpoints = 10
	sum := float64(endpoints * defaultRate)
	var rate, kafkaPer float64
	var topics string
	var run pacedRun
	var pubErrs int64
	mem, err := withSession(ctx, b, "default", func(ctx context.Context, s *session) error {
		specs := make([]endpointSpec, endpoints)
		for i := range specs {
			specs[i] = endpointSpec{
				url:        s.rcv.handle(fmt.Sprintf("/default/%d", i), route{group: "default"}),
				eventTypes: []string{fmt.Sprintf("bench.default.%d", i)},
			}
		}
		if _, err := s.h.createEndpoints(ctx, specs); err != nil {
			return err
		}
		var errs atomic.Int64
		start := time.Now()
		from, to := start.Add(b.cfg.Warmup), start.Add(b.cfg.Warmup+b.cfg.Window)
		before := s.kafka.snapshotAt(ctx, from)
		run = paced(ctx, 1.1*sum, b.cfg.Warmup+b.cfg.Window, 1<<40, 512, func(ctx context.Context, i int, _ time.Time) {
			if _, _, err := s.h.publish(ctx, fmt.Sprintf("bench.default.%d", i%endpoints), b.payload); err != nil {
				errs.Add(1)
			}
		})
		w0, err := before()
		if err != nil {
			return err
		}
		after, err := s.kafka.snapshot(ctx)
		if err != nil {
			return err
		}
		n := s.rcv.uniqueIn("default", from, to)
		rate = perSec(n, b.cfg.Window)
		if n > 0 {
			kafkaPer = float64(after.minus(w0).records) / float64(n)
		}
		topics = after.minus(w0).perDelivery(n, 4)
		pubErrs = errs.Load()
		return nil
	})
	if err != nil {
		return err
	}
	b.rep.addFigure("deliveries/s", rate, rateCell, "", func(v float64) string { return pct(v, sum) + " of the sum of rate limits (target ≥ 95%)" })
	b.rep.add("offered", fmt.Sprintf("%.0f events/s (110%% of %.0f/s); publishing fell behind by %s", float64(run.started)/run.elapsed.Seconds(), sum, ms(run.slip)), "")
	b.rep.addFigure("Kafka records written per delivery", kafkaPer, oneDecimal, "("+topics+")", func(float64) string { return "target ≤ 3" })
	b.rep.add("RSS at end", memoryLine(mem), "")
	if pubErrs > 0 {
		b.rep.add("publish errors", fmt.Sprint(pubErrs), "")
	}
	return nil
}
