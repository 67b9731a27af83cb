package dispatcher

import (
	"context"
	"log/slog"
	"math"
	"slices"
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
//     above its waiting followers spills them (ordered.go);
//   - behind a member outside, in a partition over its share of the
//     window: members that wait for a member outside memory wait for a
//     record of their own partition, which reads no more (shareFetch)
//     until what it holds leaves (spillBehindOutside).
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

// spiller spills (loop goroutine only): relief of the partitions held
// back, the lanes of a stopping loop (drain.go) and of partitions a
// rebalance moves away (yield.go), an ordered lane's waiting members
// (ordered.go) and the members behind a blocked head (block.go).
type spiller struct {
	// What it is given: the window and the lanes (fair) it looks at,
	// the config and the log; holds, which writes a spill; signers and
	// creds, which forget the endpoints of pruned lanes; settle, which
	// finishes an entry with the outputs its function returns
	// (engine.settle); and expire, which forgets the ordered lanes'
	// members gone for good (expireOrdered).
	w       *window
	f       *fair
	cfg     *Config
	log     *slog.Logger
	holds   *holds
	signers *signers
	creds   *credentials
	settle  func(*entry, func(context.Context) []*kgo.Record)
	expire  func(cutoff, now time.Time)
	// lastRelieve is when relieve last looked for stuck partitions,
	// lastPrune when it last pruned idle lanes.
	lastRelieve time.Time
	lastPrune   time.Time
}

// relieve spills the lanes that hold a partition's watermark back.
func (sp *spiller) relieve(now time.Time) {
	if now.Sub(sp.lastRelieve) < reliefTick {
		return
	}
	full := sp.w.full()
	sp.lastRelieve = now
	for _, pw := range sp.w.parts {
		if sp.w.overShare(pw) {
			sp.spillBehindOutside(pw, now)
		}
		head := pw.oldest()
		if head == nil || head.state != entryQueued {
			continue
		}
		switch {
		case !full && head.key != nil && now.Sub(pw.headSince) >= sp.cfg.StuckAfter:
			// An ordered lane waiting for its head holds only itself:
			// the endpoint's other keys are not stuck.
			sp.log.Warn("ordered lane holds its partition back; spilling its waiting deliveries to the retry path",
				"endpoint_id", head.lane.id, "waiting", len(head.key.members))
			sp.spillKey(head.key, now, "stuck partition")
		case full || now.Sub(pw.headSince) >= sp.cfg.StuckAfter:
			sp.spillLane(head.lane, now)
		}
	}
	if now.Sub(sp.lastPrune) >= laneIdleFor {
		sp.lastPrune = now
		sp.expire(now, now)
		pruned := sp.f.prune(now.Add(-laneIdleFor))
		sp.signers.forget(pruned)
		sp.creds.forget(pruned)
	}
}

// spillBehindOutside spills, of pw, which is over its share of the
// window, the ordered members that wait for a member outside memory.
// That member's way back (its retry, its spill, its release) is written
// to its endpoint's partition, pw, behind them, and pw reads no more
// until what it holds leaves: kept until --stuck-after, one key at a
// time, such members held back the very record they waited for (make
// sim seed 48: a partition paused 181 records behind its end, its share
// filled by members waiting for members whose way back was among them;
// relief_share_test.go). What waits for a head in flight or may start
// stays: it leaves by itself.
func (sp *spiller) spillBehindOutside(pw *partWindow, now time.Time) {
	var done []*keyLane
	for _, en := range pw.entries[pw.head:] {
		k := en.key
		if en.state != entryQueued || k == nil || slices.Contains(done, k) {
			continue
		}
		done = append(done, k)
		first, ok := k.firstOutside()
		if !ok || !slices.ContainsFunc(k.members, func(m *entry) bool { return m.state == entryQueued && seq(m) > first }) {
			continue
		}
		sp.log.Warn("ordered members wait for a member outside in a partition over its window share; spilling them to the retry path",
			"endpoint_id", k.lane.id, "ordering_key", k.key, "partition", pw.k.partition)
		sp.spillKeyAfter(k, first, now, "behind lane head")
	}
}

// spillLane spills every delivery waiting in l.
func (sp *spiller) spillLane(l *lane, now time.Time) {
	sp.log.Warn("endpoint backlog holds its partition back; spilling its waiting deliveries to the retry path",
		"endpoint_id", l.id, "waiting", l.queued, "in_flight", l.inFlight)
	sp.spillWaiting(l, now, "stuck partition")
}

// spillWaiting spills every delivery waiting in l, for reason.
func (sp *spiller) spillWaiting(l *lane, now time.Time, reason string) {
	if l.ord != nil {
		for _, en := range l.ord.drain() {
			l.queued--
			l.qbytes -= en.size
			sp.spillOne(en, l, now, reason)
		}
	}
	for en := l.pop(); en != nil; en = l.pop() {
		sp.spillOne(en, l, now, reason)
	}
	sp.f.touch(l, now)
}

// spillOne defers en, which is not (or no longer) in l's queue.
func (sp *spiller) spillOne(en *entry, l *lane, now time.Time, reason string) {
	due := l.spillDue(now, l.queued+l.inFlight, minSpillDelay)
	if k := en.key; k != nil {
		// Not back before the members it waits for (ordered_return_test.go).
		due = later(due, k.backBefore(seq(en)))
	}
	holds := sp.holds
	sp.settle(en, func(ctx context.Context) []*kgo.Record {
		annotate(ctx, en.d)
		return holds.spill(ctx, en.rec, en.d, due, reason)
	})
}

// spillKey spills k's waiting members, in lane_seq order; they are
// outside once spilled (settledOrdered).
func (sp *spiller) spillKey(k *keyLane, now time.Time, reason string) {
	sp.spillKeyAfter(k, math.MinInt64, now, reason)
}

// spillKeyAfter spills k's waiting members after lane_seq after, in
// lane_seq order; the ones before it keep their places.
func (sp *spiller) spillKeyAfter(k *keyLane, after int64, now time.Time, reason string) {
	l := k.lane
	i, _ := slices.BinarySearchFunc(k.members, after, func(m *entry, s int64) int {
		if seq(m) <= s {
			return -1
		}
		return 1
	})
	waiting := slices.Clone(k.members[i:])
	clear(k.members[i:])
	k.members = k.members[:i]
	for _, m := range waiting {
		if m.state != entryQueued {
			continue
		}
		l.unqueue(m)
		sp.spillOne(m, l, now, reason)
	}
	sp.f.touch(l, now)
}
