package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/endpoints"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/payloadref"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Operators' commands on blocked lanes (LaneService in ingest). A command
// is a Delivery record of kind LANE_COMMAND on the deliveries topic,
// keyed by endpoint id: it reaches the dispatcher that owns the lane, in
// log order with the lane's members, and its effects are written in the
// transaction that commits its offset, like any delivery's outputs — a
// command is applied exactly once, across crashes and rebalances. It
// names the blocked head by delivery id: a command for a head that is
// not blocked (any more) is stale and does nothing.
//
//   - skip: the head is dead-lettered (FAILED, "skipped by an operator")
//     and leaves the lane; its followers go on in order.
//   - resend: the head is written back to the deliveries topic with a
//     fresh budget (attempt 1, a new give-up time at its attempt); it is
//     outside, no longer blocked, so the lane stays ordered behind it
//     until it comes back and takes its first place again.

// isLaneCommand reports whether d is an operator's command, not a delivery.
func isLaneCommand(d *hooklinev1.Delivery) bool {
	return d.GetKind() == hooklinev1.DeliveryKind_DELIVERY_KIND_LANE_COMMAND
}

// laneCommands applies the operators' commands on blocked heads and the
// scheduler's releases of members it set aside (loop goroutine only).
type laneCommands struct {
	// What it is given: the window and the lanes (fair); the config
	// and the log; the endpoints view, the writer and the topics a
	// command's records name; ord, whose keyLanes the commands change;
	// rs, which has a command wait for its endpoint or for its blocked
	// head's payload; and settle, which finishes a command's entry with
	// the outputs its function returns (engine.settle).
	w      *window
	f      *fair
	cfg    *Config
	log    *slog.Logger
	store  *endpoints.Store
	writer *recordWriter
	topics *hkafka.Topics
	ord    *orderedLanes
	rs     *resolvers
	settle func(*entry, func(context.Context) []*kgo.Record)
}

// laneCommand applies the command en carries.
func (lc *laneCommands) laneCommand(en *entry, now time.Time) {
	d := en.d
	log := lc.log.With("endpoint_id", d.GetEndpointId(), "ordering_key", d.GetOrderingKey(), "delivery_id", d.GetDeliveryId(),
		"command_id", d.GetLaneCommand().GetCommandId(), "op", d.GetLaneCommand().GetOp().String())
	ep := lc.store.Get(d.GetEndpointId())
	if ep == nil && !en.synced {
		lc.rs.resolve(en)
		return
	}
	if ep == nil || ep.GetEndpoint().GetTenantId() != d.GetTenantId() {
		log.Warn("lane command for an endpoint that is gone; nothing to do")
		lc.w.finish(en, nil)
		return
	}
	l := lc.f.lane(ep.GetEndpoint().GetId(), ep.GetEndpoint().GetTenantId())
	lc.cfg.configure(l, ep, now)
	op := d.GetLaneCommand().GetOp()
	if op == hooklinev1.LaneOp_LANE_OP_RELEASE {
		lc.releaseMember(en, l, ep, log, now)
		return
	}
	k := lc.ord.keyLaneOf(l, en.part, d.GetOrderingKey(), now)
	id := d.GetDeliveryId()
	out, ok := k.outside[id]
	if !ok || out.blocked == nil || (op != hooklinev1.LaneOp_LANE_OP_SKIP && op != hooklinev1.LaneOp_LANE_OP_RESEND) {
		log.Warn("stale lane command: the delivery is not the lane's blocked head (any more); nothing to do")
		lc.w.finish(en, nil)
		l.ord.touch(k)
		return
	}
	head, gone, ready := lc.rs.headDelivery(en, out.blocked)
	if !ready {
		return // its payload is being read back; en is placed again then
	}
	if gone && op == hooklinev1.LaneOp_LANE_OP_RESEND {
		// Nothing to resend: the lane is released as by a skip, and the
		// dead letter says why (the event's history still has the
		// payload: resend it from there).
		log.Warn("blocked head's payload is no longer retained; resend taken as a skip")
		op = hooklinev1.LaneOp_LANE_OP_SKIP
	}
	var member *hooklinev1.LaneMember // the lane change: the head's entry after the command
	var fn func(context.Context) []*kgo.Record
	if op == hooklinev1.LaneOp_LANE_OP_SKIP {
		delete(k.outside, id)
		last := out.blocked.GetLastResult()
		fn = func(ctx context.Context) []*kgo.Record {
			res := lc.writer.result(head, now)
			res.State = hooklinev1.DeliveryState_DELIVERY_STATE_FAILED
			res.Reason = fmt.Sprintf("skipped by an operator while it blocked its ordered lane; its last attempt (%d): %s",
				last.GetAttempt(), last.GetReason())
			if gone {
				res.Reason += "; its payload was no longer retained (past --topic-retention): dead-lettered without it"
			}
			log.Info("blocked head skipped; dead-lettered, lane released")
			setOutcome(ctx, "lane_skipped")
			return lc.writer.deadLetter(ctx, head, res)
		}
	} else {
		k.outside[id] = outsider{seq: out.seq, until: now.Add(lc.cfg.MaxHold)} // due at once
		member = &hooklinev1.LaneMember{DeliveryId: id, LaneSeq: out.seq}
		fresh := proto.Clone(head).(*hooklinev1.Delivery)
		fresh.Attempt = 1
		fresh.FirstAttemptAt, fresh.GiveUpAt = nil, nil // set afresh at its attempt
		fresh.HeldSince, fresh.PausedFor = nil, nil
		fresh.Kind = hooklinev1.DeliveryKind_DELIVERY_KIND_RETRY
		fresh.DueAt = timestamppb.New(now) // due now; unique, so never taken for a copy
		fn = func(ctx context.Context) []*kgo.Record {
			log.Info("blocked head resent with a fresh attempt budget; the lane stays behind it")
			setOutcome(ctx, "lane_resent")
			return lc.writer.records(lc.topics.Deliveries, d.GetEndpointId(), fresh)
		}
	}
	lc.settle(en, fn)
	en.opMember = member
	lc.ord.laneChanged(en, k, now)
}

// releaseMember applies the scheduler's release of a member it set
// aside (LANE_OP_RELEASE): the member ended FAILED outside the lane, on
// its way back, so the lane stops waiting for it and its followers go
// on. The lane is the one the endpoint's mode puts the member in (the
// scheduler does not know the mode). The lane change is written with
// the command's offset, like a skip's; a release of a member the lane
// does not hold outside (or holds blocked: blocked heads do not travel
// through the scheduler) does nothing.
func (lc *laneCommands) releaseMember(en *entry, l *lane, ep *hooklinev1.EndpointRecord, log *slog.Logger, now time.Time) {
	d := en.d
	if !isOrdered(ep, d) {
		lc.w.finish(en, nil) // the endpoint is no longer ordered: nothing waits
		return
	}
	k := lc.ord.keyLaneOf(l, en.part, laneKey(ep, d), now)
	id := d.GetDeliveryId()
	if out, ok := k.outside[id]; !ok || out.blocked != nil {
		log.Info("release of a lane member not outside its lane; nothing to do")
		lc.w.finish(en, nil)
		l.ord.touch(k)
		return
	}
	delete(k.outside, id)
	log.Warn("lane member set aside by the scheduler; its lane goes on without it")
	lc.settle(en, func(context.Context) []*kgo.Record { return nil })
	en.opMember = nil
	lc.ord.laneChanged(en, k, now)
}

// headDelivery returns a blocked head's delivery whole, payload included,
// for a command on it (en). A lane written before heads were kept by
// reference holds it whole; otherwise its payload is read back from the
// record delivery_record names (platform/payloadref), on a goroutine of
// its own: en waits meanwhile as a resolving entry (below the watermark,
// in offset order with the partition's other resolving entries) and is
// placed again, with the read's result, when it ends. gone says the
// record is no longer retained: the delivery comes without its payload.
func (rs *resolvers) headDelivery(en *entry, b *hooklinev1.BlockedHead) (d *hooklinev1.Delivery, gone, ready bool) {
	d = b.GetDelivery()
	if len(d.GetPayload()) > 0 || b.GetDeliveryRecord() == nil {
		return d, false, true
	}
	if got, ok := rs.heads.take(en); ok {
		return got.d, got.gone, true
	}
	pw := en.part
	rs.queueResolving(en, false)
	en.fetching = true
	*rs.outstanding++
	ctx, read := pw.ctx, rs.readRecord
	go func() {
		got, err := readHead(ctx, read, b)
		if err == nil {
			err = ctx.Err() // read, but the partition went away meanwhile
		}
		if err == nil {
			rs.heads.put(en, got)
		}
		// With err the partition went away or the loop is stopping: the
		// command stays uncommitted and comes again.
		rs.in.post(msg{kind: msgHeadRead, e: en, part: pw, err: err})
	}()
	return nil, false, false
}

// readHead reads b's delivery back from its record, retrying (with
// backoff) a read that fails for any reason but the record's absence,
// until ctx ends.
func readHead(ctx context.Context, read func(context.Context, *hooklinev1.RecordRef) (*kgo.Record, error), b *hooklinev1.BlockedHead) (fetchedHead, error) {
	wait := 100 * time.Millisecond
	for {
		r, err := read(ctx, b.GetDeliveryRecord())
		if err == nil {
			var d *hooklinev1.Delivery
			if d, err = decodeDelivery(r); err == nil && d.GetDeliveryId() == b.GetDelivery().GetDeliveryId() {
				whole := proto.Clone(b.GetDelivery()).(*hooklinev1.Delivery)
				whole.Payload = d.GetPayload()
				return fetchedHead{d: whole}, nil
			}
			err = fmt.Errorf("%w: the record at the reference is not the head's", payloadref.ErrGone)
		}
		if errors.Is(err, payloadref.ErrGone) {
			return fetchedHead{d: b.GetDelivery(), gone: true}, nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fetchedHead{}, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 10*time.Second)
	}
}

// fetchedHead is a blocked head read back for a command.
type fetchedHead struct {
	d    *hooklinev1.Delivery
	gone bool
}

// fetchedHeads hand heads read back from their goroutine to the loop,
// by command entry. Safe for concurrent use.
type fetchedHeads struct {
	mu sync.Mutex
	m  map[*entry]fetchedHead
}

func (f *fetchedHeads) put(en *entry, h fetchedHead) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[*entry]fetchedHead{}
	}
	f.m[en] = h
}

func (f *fetchedHeads) take(en *entry) (fetchedHead, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h, ok := f.m[en]
	delete(f.m, en)
	return h, ok
}
