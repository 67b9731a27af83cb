package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Batched delivery (issue 30): what batching buys an endpoint whose
// receiver's round trip is the bound, and the latency its max_wait adds.

const (
	// batchWork is how long the receiver takes per request, batch or
	// not: with a cap of 10 an unbatched endpoint takes at most 1,000
	// deliveries/s.
	batchWork = 10 * time.Millisecond
	// batchEvents and batchWait are the batched runs' settings.
	batchEvents = 100
	batchWait   = 100 * time.Millisecond
	// batchPacedRate is the events/s of the latency runs: well within
	// what the endpoint takes unbatched, so the latency added is the
	// batch's wait, not a queue.
	batchPacedRate = 500
)

// batchResult is one run of runBatching.
type batchResult struct {
	rate  float64 // deliveries/s in the window
	posts float64 // requests answered 2xx per delivery
	q     quantiles
	kafka string // Kafka records written per delivery in the window
}

// runBatching offers one endpoint (cap 10, rate lifted, a receiver that
// takes 10 ms a request) as much as it can take, unbatched and batched
// (max_events 100, max_wait 100 ms), and then 500 events/s paced, each
// way, for the latency max_wait adds.
func runBatching(ctx context.Context, b *bench) error {
	settings := &hooklinev1.BatchSettings{MaxEvents: batchEvents, MaxWait: durationpb.New(batchWait)}
	none, err := batchRun(ctx, b, "batch-none", nil, 0)
	if err != nil {
		return fmt.Errorf("unbatched: %w", err)
	}
	batched, err := batchRun(ctx, b, "batch-100", settings, 0)
	if err != nil {
		return fmt.Errorf("batched: %w", err)
	}
	noneLat, err := batchRun(ctx, b, "batch-none-paced", nil, batchPacedRate)
	if err != nil {
		return fmt.Errorf("unbatched, paced: %w", err)
	}
	batchedLat, err := batchRun(ctx, b, "batch-100-paced", settings, batchPacedRate)
	if err != nil {
		return fmt.Errorf("batched, paced: %w", err)
	}
	b.rep.add("unbatched: deliveries/s · requests per delivery", fmt.Sprintf("%.0f/s · %.3f", none.rate, none.posts), fmt.Sprintf("endpoint ceiling %d/s (cap 10, receiver 10 ms a request)", int(10*time.Second/batchWork)))
	b.rep.add(fmt.Sprintf("batched (max_events %d, max_wait %v): deliveries/s · requests per delivery", batchEvents, batchWait), fmt.Sprintf("%.0f/s · %.3f", batched.rate, batched.posts), "")
	b.rep.add("batched / unbatched deliveries/s", "", pct(batched.rate, none.rate)+" (target ≥ 100%)")
	fewer := "n/a"
	if batched.posts > 0 {
		fewer = fmt.Sprintf("%.1f× fewer", none.posts/batched.posts)
	}
	b.rep.add("requests per delivery, batched against unbatched", "", fewer+" (target ≥ 10× fewer)")
	b.rep.add(fmt.Sprintf("latency publish → receiver at %d events/s: unbatched · batched", batchPacedRate), fmt.Sprintf("%s · %s", noneLat.q, batchedLat.q), fmt.Sprintf("max_wait %v: a partial batch waits for more", batchWait))
	b.rep.add("Kafka records written per delivery", fmt.Sprintf("unbatched: %s; batched: %s", none.kafka, batched.kafka), "")
	return nil
}

// batchRun is one run of runBatching: closed loop (rate 0) or paced.
func batchRun(ctx context.Context, b *bench, name string, settings *hooklinev1.BatchSettings, rate float64) (batchResult, error) {
	var res batchResult
	_, err := withSession(ctx, b, name, func(ctx context.Context, s *session) error {
		const group = "batching"
		if _, err := s.h.createEndpoint(ctx, endpointSpec{
			url:        s.rcv.handle("/batching", route{group: group, kind: answerSlow, delay: batchWork}),
			eventTypes: []string{"bench.batching"}, maxInFlight: 10, rate: 100000, batch: settings,
		}); err != nil {
			return err
		}
		start := time.Now()
		from, to := start.Add(b.cfg.Warmup), start.Add(b.cfg.Warmup+b.cfg.Window)
		before := s.kafka.snapshotAt(ctx, from)
		postsBefore := atomic.Int64{}
		go func() {
			t := time.NewTimer(time.Until(from))
			defer t.Stop()
			select {
			case <-t.C:
				postsBefore.Store(s.rcv.postsOf(group))
			case <-ctx.Done():
			}
		}()
		log := newPublishLog()
		if rate > 0 {
			paced(ctx, rate, b.cfg.Warmup+b.cfg.Window, 1<<40, 256, func(ctx context.Context, _ int, due time.Time) {
				id, _, err := s.h.publishKeyed(ctx, "bench.batching", b.payload, "")
				if err != nil {
					log.errs.Add(1)
					return
				}
				log.add(id, due)
			})
		} else {
			cr := newCredits(orderedAhead)
			s.rcv.notify(func(g string) {
				if g == group {
					cr.give()
				}
			})
			closedLoop(ctx, b.cfg.Publishers, 1<<40, to, func(ctx context.Context, _ int) {
				if cr.take(ctx, 1) != nil {
					return
				}
				if _, _, err := s.h.publishKeyed(ctx, "bench.batching", b.payload, ""); err != nil {
					log.errs.Add(1)
					cr.give()
				}
			})
		}
		postsAfter := s.rcv.postsOf(group)
		if n := log.errs.Load(); n > 0 {
			return fmt.Errorf("%d publishes failed", n)
		}
		w0, err := before()
		if err != nil {
			return err
		}
		w1, err := s.kafka.snapshot(ctx)
		if err != nil {
			return err
		}
		n := s.rcv.uniqueIn(group, from, to)
		res.rate = perSec(n, b.cfg.Window)
		if n > 0 {
			res.posts = float64(postsAfter-postsBefore.Load()) / float64(n)
		}
		res.kafka = w1.minus(w0).perDelivery(n, 4)
		if rate > 0 {
			if err := drain(ctx, s, group, log.len(), b.cfg.Drain); err != nil {
				return err
			}
			ds, _ := log.latencies(s.rcv.arrivals(group), from, to)
			res.q = quantilesOf(ds)
		}
		return nil
	})
	return res, err
}
