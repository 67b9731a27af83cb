package dispatcher

import (
	"context"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/services/dispatcher/health"
	"github.com/twmb/franz-go/pkg/kgo"
)

// place decides where a polled record goes: settled at once (not due,
// endpoint deleted or paused, undecodable), to its partition's resolver
// (the partition's lanes not read yet, its endpoint not known yet, or an
// earlier record of its endpoint waiting there: resolve.go), or into its
// endpoint's lane — or, when the lane's backlog is over its budget,
// spilled to the retry path due when the lane will have room.
func (e *engine) place(en *entry, now time.Time) {
	s := e.s
	if en.d == nil {
		d, err := decodeDelivery(en.rec)
		if err != nil {
			e.settle(en, func(ctx context.Context) []*kgo.Record {
				return []*kgo.Record{s.handler.workerFault(ctx, en.rec, err.Error())}
			})
			return
		}
		en.d = d
	}
	if e.rs.mustWait(en) {
		// An endpoint the view does not know waits for the next sync
		// of the endpoints view as well.
		e.rs.queueResolving(en, s.store.Get(en.d.GetEndpointId()) == nil)
		e.rs.kick(en.part)
		return
	}
	e.placeNow(en, now)
}

// placeNow places en, decoded, whose partition's state is read.
func (e *engine) placeNow(en *entry, now time.Time) {
	s := e.s
	if isLaneCommand(en.d) {
		e.cmds.laneCommand(en, now)
		return
	}
	v, ep := s.handler.triage(en.d, now, en.synced)
	switch v {
	case toLane:
	case needSync:
		e.rs.resolve(en)
		return
	case notDue:
		if e.early.hold(en, now) { // early.go
			return
		}
		e.settleTriaged(en, v, ep, now)
		return
	default:
		e.settleTriaged(en, v, ep, now)
		return
	}
	if e.recent.copied(recordCopyKey(en.rec, en.d), recordAt{en.rec.Partition, en.rec.Offset}) {
		// A copy of a delivery placed moments ago (see dedupe.go):
		// nothing to attempt, nothing to write.
		s.log.Info("copy of a delivery already taken; skipped", "delivery_id", en.d.GetDeliveryId(), "endpoint_id", en.d.GetEndpointId(), "attempt", en.d.GetAttempt())
		e.w.finish(en, nil)
		return
	}
	l := e.f.lane(ep.GetEndpoint().GetId(), ep.GetEndpoint().GetTenantId())
	s.cfg.configure(l, ep, now)
	if isOrdered(ep, en.d) {
		e.ord.placeOrdered(en, l, ep, now)
		return
	}
	if l.queued >= s.cfg.queueLimit(l) || l.qbytes+en.size > s.cfg.QueueBytes {
		e.sp.spillOne(en, l, now, "backlog")
		return
	}
	l.push(en, now)
	e.f.touch(l, now)
	e.f.ready(l, now)
}

// settleTriaged settles en by triage's verdict v. A member of an
// ordered lane takes its place in the lane first (ordered.go: its
// lane_seq, and outside while its record goes round): parked while its
// endpoint is paused, not due yet, or its endpoint deleted, it still
// comes back into its first place, however the retry path reorders it.
func (e *engine) settleTriaged(en *entry, v verdict, ep *hooklinev1.EndpointRecord, now time.Time) {
	s := e.s
	if k := e.ord.settlingLane(en, v, ep, now); k != nil && !e.ord.takePlace(en, k) {
		return
	}
	e.settle(en, func(ctx context.Context) []*kgo.Record { return s.handler.settle(ctx, v, en.rec, en.d, ep, now) })
}

// configure applies ep's limits to its lane, within the ceilings.
func (cfg *Config) configure(l *lane, ep *hooklinev1.EndpointRecord, now time.Time) {
	capacity := cfg.MaxInFlight
	if n := ep.GetEndpoint().GetMaxInFlight(); n > 0 {
		capacity = int(n)
	}
	perSec := cfg.RateLimit
	if v := ep.GetEndpoint().GetRateLimitPerSecond(); v > 0 {
		perSec = v
	}
	l.configure(min(capacity, cfg.MaxInFlightCeiling), min(perSec, cfg.RateLimitCeiling), now)
	l.batch = batchingOf(ep)
}

// queueLimit is how many deliveries l may hold in memory: QueueTime
// of its rate, at least QueueMin (a lane with no rate limit is bounded by
// the window alone) — but never more than QueueTime at the pace its
// attempts' latency allows (its cap's share of the latency, lane.
// interval), nor fewer than its cap. A delivery waiting in a lane holds
// its partition's watermark and parts the offsets committed above it
// (above.go), so what cannot start within QueueTime is spilled, due when
// the lane's pace allows, not kept: an endpoint answering after 9 s with
// a cap of 10 was let keep 3,000 at its default rate limit, 45 minutes
// of them (issue 26).
func (cfg *Config) queueLimit(l *lane) int {
	limit := cfg.WindowRecords
	if l.perSec > 0 {
		limit = max(cfg.QueueMin, int(l.perSec*cfg.QueueTime.Seconds()))
	}
	if l.latency > 0 && l.cap > 0 {
		paced := float64(cfg.QueueTime) / float64(l.latency) * float64(l.cap)
		limit = min(limit, max(l.cap, int(min(paced, float64(cfg.WindowRecords)))))
	}
	return limit
}

// settle finishes en now with the outputs fn returns, inside its process
// span.
func (e *engine) settle(en *entry, fn func(context.Context) []*kgo.Record) {
	outs := e.s.handler.process(context.Background(), en.rec, fn)
	outs = e.ord.settledOrdered(en, outs, e.s.now())
	e.w.finish(en, outs)
}

// start settles or starts the head of lane l, which the fair scheduler
// picked: the endpoint's current state is looked at again (it may have
// been paused or deleted while the delivery waited), then outage mode,
// then one attempt on a goroutine of its own.
func (e *engine) start(l *lane, now time.Time) {
	s := e.s
	en := l.peek()
	if en == nil {
		return
	}
	v, ep := s.handler.triage(en.d, now, true)
	if v != toLane {
		l.pop()
		e.f.touch(l, now)
		e.settle(en, func(ctx context.Context) []*kgo.Record { return s.handler.settle(ctx, v, en.rec, en.d, ep, now) })
		return
	}
	s.cfg.configure(l, ep, now)
	if !l.capOK() {
		return
	}
	if ok, _ := l.rateReady(now); !ok {
		return
	}
	if s.rcv.Pausing(ep.GetEndpoint().GetId(), ep.GetVersion()) {
		// Its automatic pause is on its way: an attempt now would
		// only fail what the pause holds. Looked at again shortly:
		// the view reads the pause (the head is parked then), or the
		// pause is dropped or lost (re-armed: the lane goes on).
		l.heldUntil = now.Add(pausePendingRecheck)
		return
	}
	g, until := s.handler.gate(en.d, ep, now)
	l.pop()
	if g == health.Hold {
		e.f.touch(l, now)
		e.settle(en, func(ctx context.Context) []*kgo.Record { return s.holds.hold(ctx, en.rec, en.d, until) })
		return
	}
	l.take(now)
	en.state = entryInFlight
	en.cost = attemptOverhead + int64(len(en.d.GetPayload()))
	probe := g == health.Probe
	if l.batch.on() && batchable(en.d) {
		// A batching endpoint's deliveries go in batches, one of one
		// included: the head and what joins it (batch.go).
		members := l.gather(en)
		group(members)
		for _, m := range members[1:] {
			m.state = entryInFlight
			en.cost += int64(len(m.d.GetPayload()))
		}
		e.f.charge(l, en.cost)
		e.f.touch(l, now)
		e.outstanding++
		go func() {
			began := time.Now()
			outs, formed := s.handler.attemptBatch(en.part.ctx, members, ep, probe)
			e.in.post(msg{kind: msgDone, e: en, group: members[1:], outs: outs, formed: formed, latency: time.Since(began)})
		}()
		return
	}
	e.f.charge(l, en.cost)
	e.f.touch(l, now)
	e.outstanding++
	go func() {
		began := time.Now()
		outs := s.handler.attemptRecord(en.part.ctx, en.rec, en.d, ep, probe)
		e.in.post(msg{kind: msgDone, e: en, outs: outs, latency: time.Since(began)})
	}()
}
