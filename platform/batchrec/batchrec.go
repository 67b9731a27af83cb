// Package batchrec turns what ends or reports a batch (issue 30: a
// Delivery with batch set, whose members travel inside it) into what
// its members need: one result each of every attempt, and one dead letter
// each at the end. The dispatcher and the scheduler both write a batch's
// results and dead letters; this is their one home, so no path reports a
// batch under its own id and leaves its members without a terminal
// result.
package batchrec

import (
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/sdk/batch"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Results returns res, a result of d, as the results to write: res
// itself when d is not a batch, else one per member — its delivery,
// event and type, and the batch's id and size.
func Results(d *hooklinev1.Delivery, res *hooklinev1.AttemptResult) []*hooklinev1.AttemptResult {
	members := d.GetBatch().GetMembers()
	if d.GetBatch() == nil {
		return []*hooklinev1.AttemptResult{res}
	}
	out := make([]*hooklinev1.AttemptResult, 0, len(members))
	for _, m := range members {
		out = append(out, memberResult(d, m, res))
	}
	return out
}

func memberResult(d, m *hooklinev1.Delivery, res *hooklinev1.AttemptResult) *hooklinev1.AttemptResult {
	mr := proto.Clone(res).(*hooklinev1.AttemptResult)
	mr.DeliveryId, mr.EventId, mr.EventType = m.GetDeliveryId(), m.GetEventId(), m.GetEventType()
	mr.BatchId, mr.BatchSize = d.GetDeliveryId(), uint32(len(d.GetBatch().GetMembers()))
	return mr
}

// DeadLetters returns d's dead letters, ended at at with res: d's own
// when it is not a batch, else one per member, each with its payload
// from the body (none when the body is not there: a batch set aside
// without it) and its own result.
func DeadLetters(d *hooklinev1.Delivery, res *hooklinev1.AttemptResult, at time.Time) []*hooklinev1.DeadLetter {
	deadAt := timestamppb.New(at)
	if d.GetBatch() == nil {
		return []*hooklinev1.DeadLetter{{Delivery: d, LastResult: res, DeadAt: deadAt}}
	}
	members := d.GetBatch().GetMembers()
	wire, err := batch.Decode(d.GetPayload())
	if err != nil || len(wire) != len(members) {
		wire = nil
	}
	out := make([]*hooklinev1.DeadLetter, 0, len(members))
	for i, m := range members {
		md := proto.Clone(m).(*hooklinev1.Delivery)
		if wire != nil {
			md.Payload = wire[i].Payload
		}
		out = append(out, &hooklinev1.DeadLetter{Delivery: md, LastResult: memberResult(d, m, res), DeadAt: deadAt})
	}
	return out
}
