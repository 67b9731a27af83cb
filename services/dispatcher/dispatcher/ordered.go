package dispatcher

import (
	"context"
	"log/slog"
	"math"
	"slices"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/endpoints"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/lanes"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
)

// Ordered delivery (docs/DESIGN.md, "Ordered delivery"). An endpoint
// ordered per_endpoint has one ordered lane, one ordered per_key has one
// per ordering key; here both are a keyLane inside the endpoint's lane,
// which keeps the endpoint's cap and rate limiter, so every keyLane of an
// endpoint shares them and the fair scheduler serves the endpoint as
// before. A keyLane has an effective cap of 1:
//
//   - its members wait sorted by lane_seq, the offset at which the
//     dispatcher first read them, kept on every later hop (retry, spill,
//     hold) so a member that comes back at a later offset sorts into its
//     first place;
//   - its head starts only when no attempt of the lane is in flight and
//     no member with a smaller lane_seq is outside memory (in the retry
//     path: a retry, a spill, a hold, a worker fault's requeue);
//   - a member whose attempt (or settlement) wrote a delivery record back
//     (retries or deliveries topic) is outside until it is read again; any
//     other outcome is terminal (delivered, or dead-lettered: on_head_failure
//     skip) and lets the next member go;
//   - with on_head_failure block, a head that fails for good is blocked
//     instead (block.go): it stays outside, kept whole in the lanes topic,
//     until an operator's command (lanecmd.go) resends or skips it.
//
// Which members are outside is also durable: each member's change is
// committed with its settlement (at the watermark, or above it), to the
// lanes topic (lanes.go), and a new owner seeds an endpoint's lanes from
// it.
//
// Unordered lanes never touch any of this (lane.ord is nil).

// orderedLanes keeps the ordered lanes' turns (loop goroutine only): it
// places a member in its keyLane, notes how each ended its turn, and
// forgets lanes that are stale. Their state lives in the lanes it is
// given (lane.ord, below).
type orderedLanes struct {
	// What it is given: the window and the lanes (fair); the config,
	// the log and the clock; the endpoints view, the lanes topic's view
	// that seeds a keyLane (view), the writer and the topics a
	// settlement's records name; sp, which spills a member that must
	// not wait in memory; and fits, which sizes a lane's record with a
	// member outside (laneCommit.fits: the commit's share of the lanes
	// topic).
	w      *window
	f      *fair
	cfg    *Config
	log    *slog.Logger
	now    func() time.Time
	store  *endpoints.Store
	view   *lanes.View
	writer *recordWriter
	topics *hkafka.Topics
	sp     *spiller
	fits   func(*keyLane, *hooklinev1.LaneMember) (string, bool)
}

// ordering is an endpoint lane's ordered part.
type ordering struct {
	part *partWindow // the partition the endpoint's deliveries come from
	// seeds are the lanes topic's members outside memory per key, as of
	// the ordering's making; a keyLane takes its seed when it is made.
	seeds   map[string]lanes.Members
	keys    map[string]*keyLane
	ready   fifo[*keyLane] // keyLanes that may be startable; checked when taken
	waiting int            // members waiting in memory (counted in lane.queued too)
}

// keyLane is one ordered lane: an ordered endpoint, or an (endpoint,
// ordering key) pair.
type keyLane struct {
	lane    *lane
	key     string
	members []*entry // waiting in memory, sorted by lane_seq; dropped ones are skipped
	head    *entry   // the member in flight (or being settled), if any
	outside map[string]outsider
	inReady bool
	// committed is the outside list as of the committed settlements
	// (below the watermark, and above it: above.go): what the lanes topic
	// says (lanes.go); pending counts the lane changes of entries not
	// committed yet.
	committed lanes.Members
	pending   int
}

// outsider is a member outside memory, by delivery id.
type outsider struct {
	seq int64
	// until is when the lane stops waiting for it (expireOrdered): its
	// way back is due by then and the longest hold after that
	// (--max-hold) has ended, so one still away ended elsewhere.
	until time.Time
	// blocked is set for a blocked head: it does not come back by
	// itself, only through an operator's command.
	blocked *hooklinev1.BlockedHead
	// back is when its way back is due: the due time of its retry or
	// deferral. It is zero where that is not known or not kept to — a
	// member seeded from the lanes topic, a hold the scheduler releases
	// when its endpoint resumes, a block.
	back time.Time
}

// isOrdered reports whether d takes its turn in an ordered lane of ep. An
// operator's resend and a test event are one-off attempts outside any
// lane: they neither wait for a lane nor hold one.
func isOrdered(ep *hooklinev1.EndpointRecord, d *hooklinev1.Delivery) bool {
	switch d.GetKind() {
	case hooklinev1.DeliveryKind_DELIVERY_KIND_RESEND, hooklinev1.DeliveryKind_DELIVERY_KIND_TEST:
		return false
	}
	switch ep.GetEndpoint().GetOrdering() {
	case hooklinev1.Ordering_ORDERING_PER_ENDPOINT, hooklinev1.Ordering_ORDERING_PER_KEY:
		return true
	}
	return false
}

// laneKey is d's ordered lane within endpoint ep.
func laneKey(ep *hooklinev1.EndpointRecord, d *hooklinev1.Delivery) string {
	if ep.GetEndpoint().GetOrdering() == hooklinev1.Ordering_ORDERING_PER_KEY {
		return d.GetOrderingKey()
	}
	return ""
}

// seq is e's place in its lane.
func seq(e *entry) int64 { return e.d.GetLaneSeq() }

// placeOrdered puts en, of an ordered endpoint, into its keyLane of l,
// or spills it when l is over its backlog budget (it is then outside).
func (ol *orderedLanes) placeOrdered(en *entry, l *lane, ep *hooklinev1.EndpointRecord, now time.Time) {
	k := ol.keyLaneOf(l, en.part, laneKey(ep, en.d), now)
	o := l.ord
	if !ol.takePlace(en, k) {
		return
	}
	if k.blockedBefore(seq(en)) {
		ol.sp.spillBlocked(en, now) // settledOrdered notes it outside
		return
	}
	if ol.backLater(k, seq(en), now) {
		ol.sp.spillOne(en, l, now, "behind lane head") // settledOrdered notes it outside
		return
	}
	if !k.awaited(seq(en)) && (l.queued >= ol.cfg.queueLimit(l) || l.qbytes+en.size > ol.cfg.QueueBytes) {
		ol.sp.spillOne(en, l, now, "backlog") // settledOrdered notes it outside
		return
	}
	en.state, en.lane, en.queuedAt = entryQueued, l, now
	i, _ := slices.BinarySearchFunc(k.members, seq(en), func(m *entry, s int64) int {
		return int(min(max(seq(m)-s, -1), 1))
	})
	k.members = slices.Insert(k.members, i, en)
	l.queued++
	l.qbytes += en.size
	o.waiting++
	o.touch(k)
	ol.f.touch(l, now)
	ol.f.ready(l, now)
}

// takePlace makes en, read now, k's member at its place: its lane_seq
// given on its first read, no longer outside. It returns false when en
// is a copy of k's blocked head, finished here.
func (ol *orderedLanes) takePlace(en *entry, k *keyLane) bool {
	id := en.d.GetDeliveryId()
	if out, ok := k.outside[id]; ok && out.blocked != nil {
		// Only an operator's command sends a blocked head again, and it
		// unblocks it first (lanecmd.go): this is a copy of a record
		// written before the block. The lane keeps it blocked.
		ol.log.Warn("copy of a blocked lane's head; skipped", "delivery_id", id, "endpoint_id", k.lane.id, "ordering_key", k.key)
		ol.w.finish(en, nil)
		return false
	}
	if en.d.LaneSeq == nil {
		// First read, or back from a path that kept the raw record (a
		// worker fault's requeue): the lane's memory knows its place.
		s := en.rec.Offset
		if out, ok := k.outside[id]; ok {
			s = out.seq
		}
		en.d.LaneSeq = &s
	}
	delete(k.outside, id)
	en.key = k
	return true
}

// settlingLane returns the keyLane en belongs to when triage settles it
// (verdict v) rather than sending it to its lane, or nil: a delivery of
// an ordered endpoint paused or not due takes its place in its lane; one
// of a deleted endpoint leaves the lane it is remembered in, if any.
func (ol *orderedLanes) settlingLane(en *entry, v verdict, ep *hooklinev1.EndpointRecord, now time.Time) *keyLane {
	d := en.d
	switch v {
	case epDeleted:
		l := ol.f.lanes[d.GetEndpointId()]
		if l == nil || l.ord == nil {
			return nil
		}
		for _, key := range []string{d.GetOrderingKey(), ""} {
			if k := l.ord.keys[key]; k != nil {
				if _, ok := k.outside[d.GetDeliveryId()]; ok {
					return k
				}
			}
		}
		return nil
	case notDue:
		ep = ol.store.Get(d.GetEndpointId()) // triage did not look
	case epPaused:
	default:
		return nil
	}
	if ep == nil || ep.GetEndpoint().GetTenantId() != d.GetTenantId() || !isOrdered(ep, d) {
		return nil
	}
	l := ol.f.lane(ep.GetEndpoint().GetId(), ep.GetEndpoint().GetTenantId())
	ol.cfg.configure(l, ep, now)
	return ol.keyLaneOf(l, en.part, laneKey(ep, d), now)
}

// keyLaneOf returns l's keyLane of key, fed by partition part, making
// it (and l's ordering) from the lanes topic's view when this
// dispatcher has none: the first of the endpoint's deliveries (or
// commands) since an assignment or a rewind.
func (ol *orderedLanes) keyLaneOf(l *lane, part *partWindow, key string, now time.Time) *keyLane {
	if l.ord == nil {
		l.ord = &ordering{keys: map[string]*keyLane{}, seeds: ol.view.Snapshot(l.id)}
	}
	o := l.ord
	o.part = part // an endpoint's deliveries come from one partition
	k := o.keys[key]
	if k == nil {
		k = &keyLane{lane: l, key: key, outside: map[string]outsider{}, committed: lanes.Members{}}
		// A seeded member's way back is not known here; it is due
		// before its give-up time, at most the endpoint's --max-age
		// after its creation, and may then be held.
		maxAge := ol.cfg.MaxAge
		if ep := ol.store.Get(l.id); ep != nil {
			maxAge = ol.cfg.rules().Age(ep)
		}
		until := now.Add(maxAge + ol.cfg.MaxHold)
		for id, m := range o.seeds[key] {
			k.outside[id] = outsider{seq: m.GetLaneSeq(), until: until, blocked: m.GetBlocked()}
			k.committed[id] = m
		}
		delete(o.seeds, key)
		o.keys[key] = k
	}
	return k
}

// startable reports whether k's head may start now.
func (k *keyLane) startable() bool {
	for len(k.members) > 0 && k.members[0].state != entryQueued {
		k.members[0] = nil
		k.members = k.members[1:]
	}
	if k.head != nil || len(k.members) == 0 {
		return false
	}
	return !k.outsideBefore(seq(k.members[0]))
}

// outsideBefore reports whether a member before lane_seq s is outside
// memory: k waits for it before s may start.
func (k *keyLane) outsideBefore(s int64) bool {
	for _, out := range k.outside {
		if out.seq < s {
			return true
		}
	}
	return false
}

// firstOutside returns the smallest lane_seq of k's members outside
// memory, if any: every member after it waits for it.
func (k *keyLane) firstOutside() (int64, bool) {
	first, ok := int64(math.MaxInt64), false
	for _, out := range k.outside {
		first, ok = min(first, out.seq), true
	}
	return first, ok
}

// awaited reports whether a member at lane_seq s is the one k waits
// for: no member before it waits in memory, is in flight or is outside.
// Such a member is let in over its lane's backlog budget: the followers
// holding that budget wait for it, and spilling it instead sent the
// lane round the retry path for ever, its followers spilled at
// --stuck-after and back before it every time (make sim seed 9). It
// passes the budget by one delivery per keyLane at most while it waits
// to start; the window bounds the rest.
func (k *keyLane) awaited(s int64) bool {
	if k.head != nil {
		return false
	}
	for _, m := range k.members {
		if m.state == entryQueued {
			if seq(m) < s {
				return false
			}
			break
		}
	}
	return !k.outsideBefore(s)
}

// backBefore returns when the last member before lane_seq s that is
// outside is due back (zero if none is known): a member at s cannot
// start before then.
func (k *keyLane) backBefore(s int64) time.Time {
	var back time.Time
	for _, out := range k.outside {
		if out.seq < s {
			back = later(back, out.back)
		}
	}
	return back
}

// backLater reports whether a member of k at lane_seq s would wait in
// memory, for a member before it due back, longer than --stuck-after:
// it waits outside memory instead, from the start, rather than hold its
// partition until the relief spills it.
func (ol *orderedLanes) backLater(k *keyLane, s int64, now time.Time) bool {
	return k.backBefore(s).Sub(now) > ol.cfg.StuckAfter
}

// blockedBefore reports whether a blocked head before lane_seq s holds k.
func (k *keyLane) blockedBefore(s int64) bool {
	for _, out := range k.outside {
		if out.blocked != nil && out.seq < s {
			return true
		}
	}
	return false
}

// idle reports whether k holds nothing: it can be forgotten.
func (k *keyLane) idle() bool {
	return k.head == nil && len(k.outside) == 0 && len(k.members) == 0 && len(k.committed) == 0 && k.pending == 0
}

// touch is called after k changed: a startable k is offered to the
// scheduler, an idle one forgotten.
func (o *ordering) touch(k *keyLane) {
	if k.startable() {
		if !k.inReady {
			k.inReady = true
			o.ready.push(k)
		}
		return
	}
	if k.idle() && o.keys[k.key] == k {
		delete(o.keys, k.key)
	}
}

// peek returns the head of the first startable keyLane, or nil.
func (o *ordering) peek() *entry {
	for o.ready.len() > 0 {
		k := o.ready.items[o.ready.head]
		if k.startable() {
			return k.members[0]
		}
		o.ready.pop()
		k.inReady = false
	}
	return nil
}

// pop takes the head peek returned: its keyLane is busy until the head's
// outcome is known (settled).
func (o *ordering) pop() *entry {
	en := o.peek()
	if en == nil {
		return nil
	}
	k := o.ready.pop()
	k.inReady = false
	k.members[0] = nil
	k.members = k.members[1:]
	k.head = en
	o.waiting--
	return en
}

// drain takes every waiting member, each keyLane's in lane_seq order:
// the lane is being spilled.
func (o *ordering) drain() []*entry {
	var out []*entry
	for _, k := range o.keys {
		for _, en := range k.members {
			if en.state == entryQueued {
				out = append(out, en) // outside once spilled (settledOrdered)
			}
		}
		clear(k.members)
		k.members = k.members[:0]
	}
	o.waiting = 0
	return out
}

// settledOrdered notes how a member of an ordered lane ended its turn:
// outside when its outputs send the delivery round again, blocked when
// they block its lane (block.go), otherwise terminal. Either way its
// keyLane is no longer busy with it. It returns the outputs to write:
// a block's mark is taken out of them.
func (ol *orderedLanes) settledOrdered(en *entry, outs []*kgo.Record, now time.Time) []*kgo.Record {
	blocked, outs := ol.takeBlockMark(en, outs)
	k := en.key
	if k == nil {
		return outs
	}
	en.key = nil
	if k.head == en {
		k.head = nil
	}
	id := en.d.GetDeliveryId()
	delete(k.outside, id)
	en.opMember = nil
	switch {
	case blocked != nil:
		k.outside[id] = outsider{seq: seq(en), blocked: blocked}
		en.opMember = &hooklinev1.LaneMember{DeliveryId: id, LaneSeq: seq(en), Blocked: blocked}
	default:
		for _, r := range outs {
			if ol.writer.carriesOn(r.Topic) {
				out := outsider{seq: seq(en), until: returnDue(r, now).Add(ol.cfg.MaxHold)}
				if r.Topic == ol.topics.Retries {
					out.back = returnDue(r, now) // parked: released at a resume
				}
				k.outside[id] = out
				en.opMember = &hooklinev1.LaneMember{DeliveryId: id, LaneSeq: seq(en)}
				break
			}
		}
	}
	if en.opMember != nil {
		if why, ok := ol.fits(k, en.opMember); !ok {
			// Blamed on this delivery before the transaction: it ends
			// FAILED, dead-lettered, and the lane goes on without it.
			delete(k.outside, id)
			en.opMember = nil
			outs = ol.writer.setAside(context.Background(), en.d, outs, why)
		}
	}
	ol.laneChanged(en, k, now)
	return outs
}

// laneChanged notes that en's settlement changed k (en.opMember): the
// lanes topic learns of it in the commit that commits en's settlement
// (at the watermark, or above it).
func (ol *orderedLanes) laneChanged(en *entry, k *keyLane, now time.Time) {
	en.opKey = k
	k.pending++
	l := k.lane
	if l.ord == nil || l.ord.keys[k.key] != k {
		return
	}
	if en.opMember != nil { // outside or blocked: its followers wait
		ol.spillFollowers(k, en, now)
	}
	l.ord.touch(k)
	ol.f.ready(l, now)
}

// spillFollowers spills en's followers waiting in k — the members
// after it in lane_seq — when en, which just went outside, is due back
// later than --stuck-after from now (they would wait that long, holding
// their partition, before the relief spilled them), or when one of them
// was read before en, which just went outside or blocked its lane: en's way back (its retry, its
// deferral, an operator's resend) or its block is written only when its
// settlement commits — above the watermark when the offset commit's
// metadata has room, else when the watermark passes en — and they would
// hold that watermark waiting for en, until --stuck-after. A head that
// goes outside from its first read is below its followers and needs
// none of this. Members before en do not wait for it and stay: spilling
// them too (as every waiting member once was) sent a lane's head round
// the retry path whenever a follower read in the same poll went
// outside — over the lane's backlog budget, say — again at every return
// (make sim seed 9: a head due for its third attempt, spilled "behind
// lane head" every 3 s for a minute).
func (ol *orderedLanes) spillFollowers(k *keyLane, en *entry, now time.Time) {
	spill := ol.backLater(k, seq(en)+1, now)
	for _, m := range k.members {
		if spill {
			break
		}
		spill = m.state == entryQueued && seq(m) > seq(en) && m.rec.Offset < en.rec.Offset && m.part == en.part
	}
	if spill {
		ol.sp.spillKeyAfter(k, seq(en), now, "behind lane head")
	}
}

// forgetOrdered drops the ordered state of the lanes fed by partition pw,
// which this dispatcher no longer owns (or rewound): what it knew is
// stale. Their waiting members were unqueued already.
func (ol *orderedLanes) forgetOrdered(pw *partWindow) {
	for _, l := range ol.f.lanes {
		if l.ord != nil && l.ord.part == pw {
			l.ord = nil
		}
	}
}

// expireOrdered forgets the members outside whose time to come back
// (outsider.until) ended before cutoff: such a member ended elsewhere
// (its endpoint deleted or re-moded, its partition moved). A retry
// ladder's rung may be longer than --max-hold (7 days against 72 h):
// each member's time is its own way back's due time, plus the longest
// hold after it.
func (ol *orderedLanes) expireOrdered(cutoff, now time.Time) {
	for _, l := range ol.f.lanes {
		if l.ord == nil {
			continue
		}
		for _, k := range l.ord.keys {
			for id, out := range k.outside {
				// A blocked head waits for an operator, however long.
				if out.blocked == nil && out.until.Before(cutoff) {
					delete(k.outside, id)
				}
			}
			l.ord.touch(k)
		}
		ol.f.ready(l, now)
	}
}

// returnDue is when r, a delivery record sent round again, is due to be
// read back: its due_at, or now when it has none (or does not decode).
func returnDue(r *kgo.Record, now time.Time) time.Time {
	var d hooklinev1.Delivery
	if proto.Unmarshal(r.Value, &d) != nil || d.GetDueAt() == nil {
		return now
	}
	return later(d.GetDueAt().AsTime(), now)
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// holds reports whether the ordered part still remembers something the
// lane must not be pruned with.
func (o *ordering) holds() bool {
	return o != nil && (len(o.keys) > 0 || len(o.seeds) > 0)
}
