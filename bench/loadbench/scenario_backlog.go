package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// backlogQueueBound is the longest the backlog scenario spends queueing.
const backlogQueueBound = 2 * time.Minute

// runBacklog queues cfg.Backlog deliveries for one endpoint with default
// limits (100/s) while 9 healthy endpoints, some on the same partition of
// the deliveries topic (it is keyed by endpoint id), get 20 events/s each.
// With the queue standing it measures, for cfg.BacklogFor, the healthy
// endpoints' latency, Kafka records and bytes Hookline writes per
// delivery, and Hookline's memory. The queue is not drained.
func runBacklog(ctx context.Context, b *bench) error {
	const healthyRate = 20
	var qQueue, qStand quantiles
	var queued int64
	var queueTook time.Duration
	var shared, parts int
	var hotRate, perDelivery, bytesPer float64
	var missing int
	var topics string
	mem, err := withSession(ctx, b, "backlog", func(ctx context.Context, s *session) error {
		hotID, err := s.h.createEndpoint(ctx, endpointSpec{
			url: s.rcv.handle("/backlog/hot", route{group: "hot"}), eventTypes: []string{"bench.backlog.hot"},
		})
		if err != nil {
			return err
		}
		specs := make([]endpointSpec, 36)
		for i := range specs {
			specs[i] = endpointSpec{
				url:        s.rcv.handle(fmt.Sprintf("/backlog/h%d", i), route{group: "healthy"}),
				eventTypes: []string{fmt.Sprintf("bench.backlog.h%d", i)},
			}
		}
		ids, err := s.h.createEndpoints(ctx, specs)
		if err != nil {
			return err
		}
		if parts, err = s.kafka.partitions(ctx, s.st.prefix+"deliveries"); err != nil {
			return err
		}
		hotPart := partitionOf(hotID, parts)
		var same, other []int
		for i, id := range ids {
			if partitionOf(id, parts) == hotPart {
				same = append(same, i)
			} else {
				other = append(other, i)
			}
		}
		// Up to 5 on the hot partition, the rest elsewhere (or, with few
		// partitions, wherever there are endpoints left).
		k := min(len(same), 5)
		healthy := append(append(append([]int{}, same[:k]...), other...), same[k:]...)[:9]
		shared = 0
		for _, i := range healthy {
			if partitionOf(ids[i], parts) == hotPart {
				shared++
			}
		}

		log := newPublishLog()
		hctx, stopHealthy := context.WithCancel(ctx)
		healthyDone := make(chan struct{})
		go func() {
			defer close(healthyDone)
			paced(hctx, float64(healthyRate*len(healthy)), backlogQueueBound+b.cfg.BacklogFor, 1<<40, 512, func(ctx context.Context, i int, due time.Time) {
				id, _, err := s.h.publish(ctx, fmt.Sprintf("bench.backlog.h%d", healthy[i%len(healthy)]), b.payload)
				if err != nil {
					log.errs.Add(1)
					return
				}
				log.add(id, due)
			})
		}()
		defer func() {
			stopHealthy()
			<-healthyDone
		}()

		ends0, err := s.kafka.partitionEnds(ctx, s.st.prefix+"deliveries")
		if err != nil {
			return err
		}
		start := time.Now()
		var ok atomic.Int64
		closedLoop(ctx, b.cfg.Publishers, b.cfg.Backlog, start.Add(backlogQueueBound), func(ctx context.Context, _ int) {
			if _, _, err := s.h.publish(ctx, "bench.backlog.hot", b.payload); err == nil {
				ok.Add(1)
			}
		})
		queued, queueTook = ok.Load(), time.Since(start)
		ends1, err := s.kafka.partitionEnds(ctx, s.st.prefix+"deliveries")
		if err != nil {
			return err
		}
		// Check the murmur2 guess against where the queue actually went.
		if seen := busiestPartition(ends0, ends1); int(seen) != hotPart {
			return fmt.Errorf("the queue went to partition %d of %s, not %d as Kafka's default partitioner says: the healthy endpoints' placement is wrong", seen, s.st.prefix+"deliveries", hotPart)
		}
		from := time.Now()
		w0, err := s.kafka.snapshot(ctx)
		if err != nil {
			return err
		}
		window := time.NewTimer(b.cfg.BacklogFor)
		defer window.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-window.C:
		}
		to := time.Now()
		w1, err := s.kafka.snapshot(ctx)
		if err != nil {
			return err
		}
		stopHealthy()
		<-healthyDone
		if err := drain(ctx, s, "healthy", log.len(), b.cfg.Drain); err != nil {
			return err
		}
		arrived := s.rcv.arrivals("healthy")
		ds, _ := log.latencies(arrived, start, from)
		qQueue = quantilesOf(ds)
		ds, missing = log.latencies(arrived, from, to)
		qStand = quantilesOf(ds)
		hot := s.rcv.uniqueIn("hot", from, to)
		n := hot + s.rcv.uniqueIn("healthy", from, to)
		hotRate = perSec(hot, to.Sub(from))
		if n > 0 {
			d := w1.minus(w0)
			perDelivery, bytesPer = float64(d.records)/float64(n), float64(d.bytes)/float64(n)
			topics = d.perDelivery(n, 4)
		}
		return nil
	})
	if err != nil {
		return err
	}
	b.rep.add("queued for the one endpoint", fmt.Sprintf("%d in %s (%.0f publishes/s)", queued, queueTook.Round(time.Second), perSec(queued, queueTook)), "")
	b.rep.add("healthy latency while queueing", qQueue.String(), "")
	b.rep.add(fmt.Sprintf("healthy latency with the queue standing (%s)", b.cfg.BacklogFor), qStand.String(), fmt.Sprintf("%d of 9 healthy share its partition (of %d; checked against where the queue went)", shared, parts))
	b.rep.add("backlogged endpoint delivered", fmt.Sprintf("%.0f/s", hotRate), pct(hotRate, defaultRate)+" of its rate limit")
	b.rep.add("Kafka written per delivery (queue standing)", fmt.Sprintf("%.1f records · %.0f bytes (%s)", perDelivery, bytesPer, topics), "")
	b.rep.add("RSS at end", memoryLine(mem), "")
	if missing > 0 {
		b.rep.add("healthy not delivered within the drain bound after the window", fmt.Sprint(missing), "")
	}
	return nil
}
