package dispatcher

import (
	"context"
	"fmt"
	"slices"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/lanes"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
)

// The lanes topic holds the durable part of ordered lanes (ordered.go):
// for each lane, the members outside memory, as of the committed
// watermark, its blocked head by reference (block.go). A lane's record
// is sized before the transaction: a member whose going outside would
// take it over recordLimit is set aside instead (laneFits), so no lanes
// record can abort a commit. The engine writes a
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

// laneOp is the lane change an entry popped by the commit in progress
// carried: an aborted commit that keeps its work gives it back (keepTxn).
type laneOp struct {
	en     *entry
	k      *keyLane
	member *hooklinev1.LaneMember
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
		e.laneOps = append(e.laneOps, laneOp{en: en, k: k, member: en.opMember})
		en.opKey = nil
		k.pending--
		id := en.d.GetDeliveryId()
		was, change := k.committed[id], en.opMember
		en.opMember = nil
		if was == nil && change == nil || was != nil && change != nil && proto.Equal(was, change) {
			continue // unchanged (not outside, or outside as committed): the record stands
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
		outs = append(outs, e.s.writer.records(e.s.topics.Lanes, key, rec)...)
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

// memberBound is the most one member that is not a blocked head takes in
// a LaneRecord: field tags and lengths, a delivery id, its lane_seq.
const memberBound = 16 + 64

// laneFits reports whether k's lanes record stays under recordLimit with
// m, a member of k just settled outside (or blocked), in it; if not, it
// says why. Its cost is a count while the lane is far from the limit,
// and a pass over the lane's outside members near it.
func (e *engine) laneFits(k *keyLane, m *hooklinev1.LaneMember) (string, bool) {
	fixed := len(k.lane.id) + len(k.key) + 16 + proto.Size(m)
	if fixed+(len(k.outside)+len(k.committed))*memberBound+64<<10 < recordLimit {
		return "", true
	}
	n := fixed
	for id, out := range k.outside {
		if id == m.GetDeliveryId() {
			continue
		}
		n += len(id) + 16
		if out.blocked != nil {
			n += proto.Size(out.blocked) + 4
		}
	}
	for id, c := range k.committed {
		if _, ok := k.outside[id]; !ok && id != m.GetDeliveryId() {
			n += proto.Size(c) + 4
		}
	}
	if n <= recordLimit {
		return "", true
	}
	return fmt.Sprintf("its ordered lane's record (%s) would be %d bytes with it outside, over the %d-byte limit", e.s.topics.Lanes, n, recordLimit), false
}
