package dispatcher

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Spilling is the only way a waiting delivery leaves memory before its
// attempt: it is deferred through the scheduler (retries topic, delay
// tiers, back to deliveries) with its attempt number and budgets
// untouched, due when its lane will have room. It happens once per
// delivery for each of:
//
//   - backlog: a lane already holds its budget (QueueTime at its
//     rate, at least QueueMin, at most QueueTime at the pace its
//     latency allows; QueueBytes) when the delivery arrives;
//   - a stuck partition: the partition's oldest uncommitted delivery has
//     waited in its lane for StuckAfter, or the window is full, so the
//     lane's waiting deliveries are spilled and the partition's other
//     endpoints go on (their completed deliveries can be committed); of
//     an ordered endpoint stuck for StuckAfter, only the stuck key's;
//   - behind an ordered lane's head: a head that goes out again from
//     above its waiting followers spills them (ordered.go).
//
// A delivery whose attempt is in flight is never spilled; one hanging
// receiver holds its partition's watermark at most for its attempt
// timeout.

// reliefTick is how often the loop looks for stuck partitions.
const reliefTick = 250 * time.Millisecond

// minSpillDelay is the shortest deferral of a spilled delivery: the
// scheduler's smallest tier.
const minSpillDelay = time.Second

// laneIdleFor is how long a lane with no work keeps its state (rate
// limiter, latency estimate) before it is pruned.
const laneIdleFor = 5 * time.Minute

// relieve spills the lanes that hold a partition's watermark back.
func (e *engine) relieve(now time.Time) {
	if now.Sub(e.lastRelieve) < reliefTick {
		return
	}
	full := e.w.full()
	e.lastRelieve = now
	for _, pw := range e.w.parts {
		head := pw.oldest()
		if head == nil || head.state != entryQueued {
			continue
		}
		switch {
		case !full && head.key != nil && now.Sub(pw.headSince) >= e.s.cfg.StuckAfter:
			// An ordered lane waiting for its head holds only itself:
			// the endpoint's other keys are not stuck.
			e.s.log.Warn("ordered lane holds its partition back; spilling its waiting deliveries to the retry path",
				"endpoint_id", head.lane.id, "waiting", len(head.key.members))
			e.spillKey(head.key, now, "stuck partition")
		case full || now.Sub(pw.headSince) >= e.s.cfg.StuckAfter:
			e.spillLane(head.lane, now)
		}
	}
	if now.Sub(e.lastPrune) >= laneIdleFor {
		e.lastPrune = now
		e.expireOrdered(now, now)
		e.s.signers.forget(e.f.prune(now.Add(-laneIdleFor)))
	}
}

// spillLane spills every delivery waiting in l.
func (e *engine) spillLane(l *lane, now time.Time) {
	e.s.log.Warn("endpoint backlog holds its partition back; spilling its waiting deliveries to the retry path",
		"endpoint_id", l.id, "waiting", l.queued, "in_flight", l.inFlight)
	e.spillWaiting(l, now, "stuck partition")
}

// spillWaiting spills every delivery waiting in l, for reason.
func (e *engine) spillWaiting(l *lane, now time.Time, reason string) {
	if l.ord != nil {
		for _, en := range l.ord.drain() {
			l.queued--
			l.qbytes -= en.size
			e.spillOne(en, l, now, reason)
		}
	}
	for en := l.pop(); en != nil; en = l.pop() {
		e.spillOne(en, l, now, reason)
	}
	e.f.touch(l, now)
}

// spillOne defers en, which is not (or no longer) in l's queue.
func (e *engine) spillOne(en *entry, l *lane, now time.Time, reason string) {
	due := l.spillDue(now, l.queued+l.inFlight, minSpillDelay)
	if k := en.key; k != nil {
		// Not back before the members it waits for (ordered_return_test.go).
		due = later(due, k.backBefore(seq(en)))
	}
	s := e.s
	e.settle(en, func(ctx context.Context) []*kgo.Record {
		annotate(ctx, en.d)
		return s.holds.spill(ctx, en.rec, en.d, due, reason)
	})
}
