package dispatcher

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/payloadref"
	"github.com/hookline/hookline/sdk/ids"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Blocking an ordered lane (on_head_failure block; docs/DESIGN.md,
// "Ordered delivery"). When the head of an ordered lane of such an
// endpoint fails for good (a permanent failure, out of attempts, out of
// time), it is not dead-lettered: its result says BLOCKED, a
// lane.blocked notice goes out, and the head stays outside the lane,
// kept in the lanes topic (delivery without its payload, last result,
// and a reference to the record holding its payload: platform/payloadref)
// in the commit that passes its attempt. The Rule (ordered.go) then holds
// every later member of the lane behind it: they wait in memory and are
// spilled in order like any stuck lane's. Only an operator's command
// (lanecmd.go) ends the block. A new owner seeds the lane from the
// lanes topic and sees it blocked.
//
// The attempt's outputs carry the block to the loop as a mark: a record
// for blockMarkTopic holding the BlockedHead, which settledOrdered takes
// out (it is never written) and makes the head's lane change.

// blockMarkTopic names the mark a blocking outcome leaves among its
// outputs; no topic has this name.
const blockMarkTopic = "\x00hookline-lane-blocked"

// blocks reports whether a failure for good of d's attempt blocks its
// lane instead of dead-lettering d: d is an ordered lane's member (it
// has its lane_seq) of an endpoint with on_head_failure block.
func blocks(ep *hooklinev1.EndpointRecord, d *hooklinev1.Delivery) bool {
	return ep.GetEndpoint().GetOnHeadFailure() == hooklinev1.HeadFailure_HEAD_FAILURE_BLOCK && d.LaneSeq != nil && isOrdered(ep, d)
}

// headFailed returns the records that end d, whose attempt failed for
// good (res says how): its dead letter, or, when it blocks its lane, its
// block. msg says why, for the log.
func (a *attempter) headFailed(ctx, rctx context.Context, log *slog.Logger, msg string, d *hooklinev1.Delivery, ep *hooklinev1.EndpointRecord, res *hooklinev1.AttemptResult) []*kgo.Record {
	if !blocks(ep, d) {
		log.InfoContext(ctx, msg+"; dead-lettered", "err", res.Error)
		return a.writer.deadLetter(rctx, d, res)
	}
	log.WarnContext(ctx, msg+"; its ordered lane is blocked until an operator resends or skips it", "err", res.Error, "ordering_key", laneKey(ep, d))
	return a.block(rctx, d, ep, res)
}

// block returns the records of d blocking its lane: a BLOCKED result, a
// lane.blocked notice and the block's mark.
func (a *attempter) block(ctx context.Context, d *hooklinev1.Delivery, ep *hooklinev1.EndpointRecord, res *hooklinev1.AttemptResult) []*kgo.Record {
	now := a.now()
	why := res.GetReason()
	res.State = hooklinev1.DeliveryState_DELIVERY_STATE_BLOCKED
	res.Reason = why + "; its ordered lane is blocked until an operator resends or skips it"
	a.writer.finished(ctx, res.State)
	out := a.writer.resultRecords(ctx, d, res) // sets the trace ids the lane keeps
	key := laneKey(ep, d)
	e := ep.GetEndpoint()
	detail := fmt.Sprintf("ordered lane %q blocked behind delivery %s (event %s): %s", key, d.GetDeliveryId(), d.GetEventId(), why)
	if res.GetStatusCode() != 0 {
		detail += fmt.Sprintf(", HTTP %d", res.GetStatusCode())
	} else if res.GetError() != "" {
		detail += ", " + res.GetError()
	}
	out = append(out, a.writer.records(a.topics.Notices, e.GetId(), &hooklinev1.Notice{
		NoticeId: ids.New(ids.Notice, now), Type: hooklinev1.NoticeType_NOTICE_TYPE_LANE_BLOCKED,
		TenantId: e.GetTenantId(), EndpointId: e.GetId(), At: timestamppb.New(now), Detail: detail,
		OrderingKey: key, DeliveryId: d.GetDeliveryId(),
	})...)
	// The lane keeps the head by reference: its payload stays in the
	// record it was read from (takeBlockMark names it), so the lanes
	// record stays small whatever the payload's size.
	small := proto.Clone(d).(*hooklinev1.Delivery)
	small.Payload = nil
	head := &hooklinev1.BlockedHead{Delivery: small, LastResult: res, BlockedAt: timestamppb.New(now)}
	v, err := proto.Marshal(head)
	if err != nil {
		panic(err) // a message Hookline built: a bug, a worker fault
	}
	return append(out, &kgo.Record{Topic: blockMarkTopic, Key: []byte(e.GetId()), Value: v})
}

// takeBlockMark takes a block's mark out of en's outputs and returns the
// head it blocks with. A member that is not in an ordered lane here any
// more (its endpoint's ordering changed while it was attempted) cannot
// block one: it is dead-lettered instead, with the result that blocked.
func (ol *orderedLanes) takeBlockMark(en *entry, outs []*kgo.Record) (*hooklinev1.BlockedHead, []*kgo.Record) {
	if en.d == nil || en.d.LaneSeq == nil {
		return nil, outs // not ordered: the unordered path pays nothing
	}
	i := slices.IndexFunc(outs, func(r *kgo.Record) bool { return r.Topic == blockMarkTopic })
	if i < 0 {
		return nil, outs
	}
	head := new(hooklinev1.BlockedHead)
	if err := proto.Unmarshal(outs[i].Value, head); err != nil {
		panic(fmt.Sprintf("a block's own mark does not decode: %v", err))
	}
	outs = slices.Delete(outs, i, i+1)
	// The head's payload lives in the record it was read from, unless that
	// record held it by reference itself (hold.go): then where it points.
	if pr := en.d.GetPayloadRecord(); pr != nil {
		head.DeliveryRecord = pr
	} else {
		head.DeliveryRecord = payloadref.Of(en.rec)
	}
	if en.key == nil {
		dl := &hooklinev1.DeadLetter{Delivery: en.d, LastResult: head.GetLastResult(), DeadAt: timestamppb.New(ol.now())}
		return nil, append(outs, ol.writer.records(ol.topics.Dead, en.d.GetEndpointId(), dl)...)
	}
	return head, outs
}

// spillBlocked parks en, a member that arrived behind its lane's blocked
// head, at once: the block lasts until an operator acts, so waiting in
// memory would only hold the partition's watermark back until
// --stuck-after spilled it. It waits in the parked topic, once, until the
// scheduler sees the lane unblocked in the lanes topic (holds.parkBehind),
// and its hold ends at --max-hold like every hold (EXPIRED,
// dead-lettered). Until 2026-12-07 it went round the retry path every
// --park-recheck while the block lasted: two records per member every
// 5 s for as long as no operator acted (make sim seed 48: 12 members,
// 120 records every 10 s with a 1 s recheck).
func (sp *spiller) spillBlocked(en *entry, now time.Time) {
	holds := sp.holds
	key := en.key.key
	sp.settle(en, func(ctx context.Context) []*kgo.Record {
		annotate(ctx, en.d)
		return holds.parkBehind(ctx, en.rec, en.d, key, now)
	})
}
