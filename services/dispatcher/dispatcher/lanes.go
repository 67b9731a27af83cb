package dispatcher

import (
	"context"
	"slices"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/lanes"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The lanes topic holds the durable part of ordered lanes (ordered.go):
// for each lane, the members outside memory, as of the committed
// watermark, its blocked head whole (block.go). The engine writes a
// lane's record in the commit whose prefix changed it (laneOutputs);
// every dispatcher follows the topic (platform/lanes.View) and seeds an
// endpoint's lanes from it the first time it places one of the
// endpoint's deliveries after an assignment.

// syncLanes waits until the lanes view holds every lane record written
// so far and committed, the previous owner's last included (bounded by
// ctx): up to the high watermarks, not the last stable offsets, which
// lag a commit until its markers are written (kafka.Follower.SyncWritten).
func (s *Service) syncLanes(ctx context.Context) error {
	return s.laneFollow.SyncWritten(ctx, s.topics.Lanes)
}

// laneUndo is one change a commit made to a keyLane's committed list,
// taken back if the transaction aborts.
type laneUndo struct {
	k   *keyLane
	id  string
	was *hooklinev1.LaneMember // nil: not outside
}

// laneOutputs applies the lane changes of the entries the commit popped
// (in offset order) to their keyLanes' committed lists, and appends the
// changed lanes' records to outs: the lanes topic then says, in the same
// transaction as the offsets, which members are outside as of the
// watermark.
func (e *engine) laneOutputs(outs []*kgo.Record) []*kgo.Record {
	if len(e.popped) == 0 {
		return outs
	}
	var dirty []*keyLane
	for _, en := range e.popped {
		k := en.opKey
		en.opKey = nil
		k.pending--
		id := en.d.GetDeliveryId()
		was, change := k.committed[id], en.opMember
		en.opMember = nil
		if was == nil && change == nil {
			continue // neither outside before nor now: the record stands
		}
		e.undo = append(e.undo, laneUndo{k: k, id: id, was: was})
		if change != nil {
			k.committed[id] = change
		} else {
			delete(k.committed, id)
		}
		if !slices.Contains(dirty, k) {
			dirty = append(dirty, k)
		}
	}
	clear(e.popped)
	e.popped = e.popped[:0]
	for _, k := range dirty {
		key := lanes.RecordKey(k.lane.id, k.key)
		if len(k.committed) == 0 {
			outs = append(outs, &kgo.Record{Topic: e.s.topics.Lanes, Key: []byte(key)})
			continue
		}
		rec := &hooklinev1.LaneRecord{EndpointId: k.lane.id, OrderingKey: k.key}
		for _, m := range k.committed {
			rec.Outside = append(rec.Outside, m)
		}
		slices.SortFunc(rec.Outside, func(a, b *hooklinev1.LaneMember) int { return int(min(max(a.GetLaneSeq()-b.GetLaneSeq(), -1), 1)) })
		outs = append(outs, e.s.records(e.s.topics.Lanes, key, rec)...)
	}
	return outs
}

// lanesCommitted ends a commit for the lanes: kept when it committed,
// taken back when it aborted.
func (e *engine) lanesCommitted(committed bool) {
	if !committed {
		for i := len(e.undo) - 1; i >= 0; i-- {
			u := e.undo[i]
			if u.was != nil {
				u.k.committed[u.id] = u.was
			} else {
				delete(u.k.committed, u.id)
			}
		}
	}
	clear(e.undo)
	e.undo = e.undo[:0]
}
