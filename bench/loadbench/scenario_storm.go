package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

// runStorm publishes cfg.Storm deliveries (100 endpoints with default
// limits, fan-out 100) to a receiver that answers 503 for
// cfg.StormFail and 204 after, and measures how long after the recovery
// the last delivery arrives, with each process's peak memory. The
// endpoints retry on a short ladder (1 s, 2 s, 5 s, …) with outage mode
// off, so every failed delivery goes through the retry path (scheduler)
// and the run ends in bounded time.
func runStorm(ctx context.Context, b *bench) error {
	const endpoints = 100
	events := (b.cfg.Storm + endpoints - 1) / endpoints
	var published int64
	var publishTook, drainTook time.Duration
	var delivered, failed int64
	var perDelivery float64
	var topics string
	var drained bool
	mem, err := withSession(ctx, b, "storm", func(ctx context.Context, s *session) error {
		policy := &hooklinev1.RetryPolicy{
			Schedule: &hooklinev1.RetryPolicy_Ladder{Ladder: &hooklinev1.RetryPolicy_DelayLadder{
				Delays: []*durationpb.Duration{durationpb.New(time.Second), durationpb.New(2 * time.Second), durationpb.New(5 * time.Second)},
			}},
			MaxAttempts: 100,
		}
		specs := make([]endpointSpec, endpoints)
		for i := range specs {
			specs[i] = endpointSpec{
				url:        s.rcv.handle(fmt.Sprintf("/storm/%d", i), route{group: "storm", kind: answerFailUntil}),
				eventTypes: []string{"bench.storm"}, retry: policy, noOutageMode: true,
			}
		}
		if _, err := s.h.createEndpoints(ctx, specs); err != nil {
			return err
		}
		w0, err := s.kafka.snapshot(ctx)
		if err != nil {
			return err
		}
		start := time.Now()
		recoverAt := start.Add(b.cfg.StormFail)
		s.rcv.recoverAt.Store(recoverAt.UnixNano())
		var ok atomic.Int64
		closedLoop(ctx, b.cfg.Publishers, events, recoverAt.Add(b.cfg.StormDrain), func(ctx context.Context, _ int) {
			if _, n, err := s.h.publish(ctx, "bench.storm", b.payload); err == nil {
				ok.Add(int64(n))
			}
		})
		published, publishTook = ok.Load(), time.Since(start)
		wctx, cancel := context.WithDeadline(ctx, recoverAt.Add(b.cfg.StormDrain))
		defer cancel()
		err = s.rcv.waitUnique(wctx, "storm", published)
		switch {
		case err == nil:
			drained = true
		case !errors.Is(err, errTimeout) || ctx.Err() != nil:
			return err
		}
		drainTook = s.rcv.lastArrival("storm").Sub(recoverAt)
		_, delivered, failed = s.rcv.counts("storm")
		w1, err := s.kafka.snapshot(ctx)
		if err != nil {
			return err
		}
		if delivered > 0 {
			perDelivery = float64(w1.minus(w0).records) / float64(delivered)
		}
		topics = w1.minus(w0).perDelivery(delivered, 4)
		return nil
	})
	if err != nil {
		return err
	}
	b.rep.add("deliveries published", fmt.Sprintf("%d in %s (receiver answers 503 for the first %s)", published, ms(publishTook), b.cfg.StormFail), "")
	state := fmt.Sprintf("all %d delivered %s after recovery", delivered, drainTook.Round(100*time.Millisecond))
	if !drained {
		state = fmt.Sprintf("**not drained**: %d of %d delivered %s after recovery (bound)", delivered, published, b.cfg.StormDrain)
	}
	b.rep.add("time to drain", state, fmt.Sprintf("%.0f deliveries/s after recovery", perSec(delivered, drainTook)))
	b.rep.add("503 answers · Kafka records per delivery", fmt.Sprintf("%d · %.1f (%s)", failed, perDelivery, topics), "")
	b.rep.add("RSS at end (peak)", memoryLine(mem), "")
	return nil
}
