package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
)

// Ordered delivery (issue 18): what ordering per key costs one endpoint,
// and what one failing lane costs the others of its endpoint.

const (
	// orderedKeys is how many ordering keys the keyed runs spread over.
	orderedKeys = 1000
	// orderedWork is how long the receiver takes per delivery in the
	// keys-vs-unordered runs: with the default cap of 10 in flight the
	// endpoint can take at most 10 / 10 ms = 1,000 deliveries/s, so the
	// runs measure whether ordering keeps that cap busy.
	orderedWork = 10 * time.Millisecond
	// orderedAhead is how many deliveries publishing may run ahead of
	// arrivals: enough backlog that the cap is never idle for want of
	// work.
	orderedAhead = 3000
	// badLaneRate is the events/s offered to the endpoint in the
	// bad-lane runs, spread over 999 healthy keys.
	badLaneRate = 500
)

// runOrdered offers one endpoint (cap 10, rate lifted, a receiver that
// takes 10 ms) as much as it can take, unordered and then ordered per key
// with each event on one of 1,000 keys at random, and reports
// deliveries/s of each and the ratio.
func runOrdered(ctx context.Context, b *bench) error {
	unordered, uKafka, err := orderedRun(ctx, b, "ordered-none", hooklinev1.Ordering_ORDERING_UNORDERED)
	if err != nil {
		return fmt.Errorf("unordered: %w", err)
	}
	keyed, kKafka, err := orderedRun(ctx, b, "ordered-keys", hooklinev1.Ordering_ORDERING_PER_KEY)
	if err != nil {
		return fmt.Errorf("per_key: %w", err)
	}
	b.rep.add("unordered: deliveries/s", fmt.Sprintf("%.0f/s", unordered), fmt.Sprintf("endpoint ceiling %d/s (cap 10, receiver 10 ms)", int(10*time.Second/orderedWork)))
	b.rep.add("ordered per_key, 1,000 keys: deliveries/s", fmt.Sprintf("%.0f/s", keyed), "")
	b.rep.add("per_key / unordered", "", pct(keyed, unordered)+" (target ≥ 80%)")
	b.rep.add("Kafka records written per delivery", fmt.Sprintf("unordered: %s; per_key: %s", uKafka, kKafka), "")
	return nil
}

// orderedRun is one run of runOrdered: deliveries/s in the window, and
// the Kafka records written per delivery in it.
func orderedRun(ctx context.Context, b *bench, name string, ordering hooklinev1.Ordering) (float64, string, error) {
	var rate float64
	var kafka string
	_, err := withSession(ctx, b, name, func(ctx context.Context, s *session) error {
		const group = "ordered"
		if _, err := s.h.createEndpoint(ctx, endpointSpec{
			url:        s.rcv.handle("/ordered", route{group: group, kind: answerSlow, delay: orderedWork}),
			eventTypes: []string{"bench.ordered"}, maxInFlight: 10, rate: 100000, ordering: ordering,
		}); err != nil {
			return err
		}
		cr := newCredits(orderedAhead)
		s.rcv.notify(func(g string) {
			if g == group {
				cr.give()
			}
		})
		start := time.Now()
		from, to := start.Add(b.cfg.Warmup), start.Add(b.cfg.Warmup+b.cfg.Window)
		before := s.kafka.snapshotAt(ctx, from)
		var errs atomic.Int64
		closedLoop(ctx, b.cfg.Publishers, 1<<40, to, func(ctx context.Context, i int) {
			if cr.take(ctx, 1) != nil {
				return
			}
			key := ""
			if ordering == hooklinev1.Ordering_ORDERING_PER_KEY {
				key = fmt.Sprint("k", rand.IntN(orderedKeys))
			}
			if _, _, err := s.h.publishKeyed(ctx, "bench.ordered", b.payload, key); err != nil {
				errs.Add(1)
				cr.give()
			}
		})
		if n := errs.Load(); n > 0 {
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
		rate = perSec(n, b.cfg.Window)
		kafka = w1.minus(w0).perDelivery(n, 4)
		return nil
	})
	return rate, kafka, err
}

// badLaneResult is what the healthy lanes got in one bad-lane run.
type badLaneResult struct {
	rate    float64
	q       quantiles
	missing int
	bad     int64  // attempts the bad lane's receiver answered 400
	kafka   string // Kafka records written in the window per healthy delivery
}

// runBadLane runs one endpoint ordered per key with on_head_failure
// block (cap 10, rate lifted, a receiver that answers at once) offered
// 500 events/s over 999 keys, alone and then beside a 1,000th key (5 more
// events/s) whose every delivery the receiver refuses with a 400: its
// first head blocks the lane for the whole run and its followers wait
// behind it. It reports the healthy lanes' deliveries/s and publish →
// receiver latency, and the ratios of the two runs.
func runBadLane(ctx context.Context, b *bench) error {
	base, err := badLaneRun(ctx, b, "badlane-alone", false)
	if err != nil {
		return fmt.Errorf("999 lanes alone: %w", err)
	}
	beside, err := badLaneRun(ctx, b, "badlane-beside", true)
	if err != nil {
		return fmt.Errorf("beside the bad lane: %w", err)
	}
	b.rep.add("bad lane", "blocked (on_head_failure block): its head answered 400, its followers waiting behind it", "")
	b.rep.add("999 lanes alone: deliveries/s · latency", fmt.Sprintf("%.0f/s (offered %d/s) · %s", base.rate, badLaneRate, base.q), "")
	b.rep.add("999 lanes beside the bad lane: deliveries/s · latency", fmt.Sprintf("%.0f/s · %s", beside.rate, beside.q), "")
	b.rep.add("throughput beside / alone", "", pct(beside.rate, base.rate)+" (target: no measurable cost)")
	p99 := "n/a"
	if base.q.p99 > 0 {
		p99 = fmt.Sprintf("%.2f×", float64(beside.q.p99)/float64(base.q.p99))
	}
	b.rep.add("p99 beside / alone", "", p99+" (target: no measurable cost)")
	b.rep.add("Kafka records written per healthy delivery", fmt.Sprintf("alone: %s; beside: %s", base.kafka, beside.kafka), "")
	b.rep.add("not delivered within the drain bound", fmt.Sprintf("%d alone, %d beside; the bad lane's receiver answered 400 %d times", base.missing, beside.missing, beside.bad), "")
	return nil
}

// badLaneRun is one run of runBadLane.
func badLaneRun(ctx context.Context, b *bench, name string, withBad bool) (badLaneResult, error) {
	var res badLaneResult
	_, err := withSession(ctx, b, name, func(ctx context.Context, s *session) error {
		const group = "lanes"
		badBody := []byte(`{"bad":true}`)
		if _, err := s.h.createEndpoint(ctx, endpointSpec{
			url:        s.rcv.handle("/lanes", route{group: group, failIf: badBody}),
			eventTypes: []string{"bench.lanes"}, maxInFlight: 10, rate: 100000,
			ordering: hooklinev1.Ordering_ORDERING_PER_KEY, onHeadFailure: hooklinev1.HeadFailure_HEAD_FAILURE_BLOCK,
		}); err != nil {
			return err
		}
		log := newPublishLog()
		start := time.Now()
		from, to := start.Add(b.cfg.Warmup), start.Add(b.cfg.Warmup+b.cfg.Window)
		before := s.kafka.snapshotAt(ctx, from)
		paced(ctx, badLaneRate, b.cfg.Warmup+b.cfg.Window, 1<<40, 512, func(ctx context.Context, i int, due time.Time) {
			if withBad && i%100 == 0 { // on top of the healthy load
				if _, _, err := s.h.publishKeyed(ctx, "bench.lanes", badBody, "bad"); err != nil {
					log.errs.Add(1)
				}
			}
			id, _, err := s.h.publishKeyed(ctx, "bench.lanes", b.payload, fmt.Sprint("k", i%(orderedKeys-1)))
			if err != nil {
				log.errs.Add(1)
				return
			}
			log.add(id, due)
		})
		if n := log.errs.Load(); n > 0 {
			return fmt.Errorf("%d publishes failed", n)
		}
		w0, err := before()
		if err != nil {
			return err
		}
		w1, err := s.kafka.snapshot(ctx) // the window's end, before the drain
		if err != nil {
			return err
		}
		if err := drain(ctx, s, group, log.len(), b.cfg.Drain); err != nil {
			return err
		}
		ds, miss := log.latencies(s.rcv.arrivals(group), from, to)
		res.q, res.missing = quantilesOf(ds), miss
		n := s.rcv.uniqueIn(group, from, to)
		res.rate = perSec(n, b.cfg.Window)
		res.kafka = w1.minus(w0).perDelivery(n, 4)
		_, _, res.bad = s.rcv.counts(group)
		return nil
	})
	return res, err
}
