package dispatcher

import (
	"context"
	"fmt"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
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

// laneCommand applies the command en carries.
func (e *engine) laneCommand(en *entry, now time.Time) {
	s := e.s
	d := en.d
	log := s.log.With("endpoint_id", d.GetEndpointId(), "ordering_key", d.GetOrderingKey(), "delivery_id", d.GetDeliveryId(),
		"command_id", d.GetLaneCommand().GetCommandId(), "op", d.GetLaneCommand().GetOp().String())
	ep := s.store.Get(d.GetEndpointId())
	if ep == nil && !en.synced {
		e.resolve(en)
		return
	}
	if ep == nil || ep.GetEndpoint().GetTenantId() != d.GetTenantId() {
		log.Warn("lane command for an endpoint that is gone; nothing to do")
		e.w.finish(en, nil)
		return
	}
	l := e.f.lane(ep.GetEndpoint().GetId(), ep.GetEndpoint().GetTenantId())
	e.configure(l, ep, now)
	k := e.keyLaneOf(l, en.part, d.GetOrderingKey(), now)
	id := d.GetDeliveryId()
	out, ok := k.outside[id]
	op := d.GetLaneCommand().GetOp()
	if !ok || out.blocked == nil || (op != hooklinev1.LaneOp_LANE_OP_SKIP && op != hooklinev1.LaneOp_LANE_OP_RESEND) {
		log.Warn("stale lane command: the delivery is not the lane's blocked head (any more); nothing to do")
		e.w.finish(en, nil)
		l.ord.touch(k)
		return
	}
	head := out.blocked.GetDelivery()
	var member *hooklinev1.LaneMember // the lane change: the head's entry after the command
	var fn func(context.Context) []*kgo.Record
	if op == hooklinev1.LaneOp_LANE_OP_SKIP {
		delete(k.outside, id)
		last := out.blocked.GetLastResult()
		fn = func(ctx context.Context) []*kgo.Record {
			res := s.result(head, now)
			res.State = hooklinev1.DeliveryState_DELIVERY_STATE_FAILED
			res.Reason = fmt.Sprintf("skipped by an operator while it blocked its ordered lane; its last attempt (%d): %s",
				last.GetAttempt(), last.GetReason())
			log.Info("blocked head skipped; dead-lettered, lane released")
			setOutcome(ctx, "lane_skipped")
			return s.deadLetter(ctx, head, res)
		}
	} else {
		k.outside[id] = outsider{seq: out.seq, until: now.Add(s.cfg.MaxHold)} // due at once
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
			return s.records(s.topics.Deliveries, d.GetEndpointId(), fresh)
		}
	}
	e.settle(en, fn)
	en.opMember = member
	e.laneChanged(en, k, now)
}
