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
// take it over recordLimit is set aside instead (laneCommit.fits), so
// no lanes record can abort a commit. The committer writes a lane's
// record in the commit whose prefix changed it (laneCommit.outputs);
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
// carried: an aborted commit that keeps its work gives it back (keepTxn,
// laneCommit.giveBack).
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

// laneCommit is the lanes topic's share of a commit (the loop's): the
// entries with a lane change the commit being built popped (or took
// above the watermark), the changes it made to their keyLanes'
// committed lists (undo: taken back if it aborts), and the lane changes
// of the entries it popped (ops: an aborted commit that keeps its work
// gives them back). It writes the lane records to topic, the lanes
// topic, with writer.
type laneCommit struct {
	topic  string
	writer *recordWriter
	popped []*entry
	undo   []laneUndo
	ops    []laneOp
}

// add takes en, popped by the commit being built with a lane change, for
// outputs.
func (c *laneCommit) add(en *entry) { c.popped = append(c.popped, en) }

// dropOps forgets the lane changes of the entries the last commit popped:
// it began anew, or it aborted and what it kept was given back.
func (c *laneCommit) dropOps() {
	clear(c.ops)
	c.ops = c.ops[:0]
}

// giveBack gives the lane changes of the entries an aborted commit
// popped back to their entries, while owned says their partition is
// owned (keepTxn, holding the window's lock).
func (c *laneCommit) giveBack(owned func(*partWindow) bool) {
	for _, op := range c.ops {
		if owned(op.en.part) {
			op.en.opKey, op.en.opMember = op.k, op.member
			op.k.pending++
			if o := op.k.lane.ord; o != nil && o.keys[op.k.key] == nil {
				o.keys[op.k.key] = op.k // forgotten as idle meanwhile
			}
		}
	}
}

// outputs applies the lane changes of the entries the commit popped
// (in offset order) to their keyLanes' committed lists, and appends the
// changed lanes' records to outs: the lanes topic then says, in the same
// transaction as the offsets, which members are outside as of the
// watermark.
func (c *laneCommit) outputs(outs []*kgo.Record) []*kgo.Record {
	if len(c.popped) == 0 {
		return outs
	}
	var dirty []*keyLane
	for _, en := range c.popped {
		k := en.opKey
		c.ops = append(c.ops, laneOp{en: en, k: k, member: en.opMember})
		en.opKey = nil
		k.pending--
		id := en.d.GetDeliveryId()
		was, change := k.committed[id], en.opMember
		en.opMember = nil
		if was == nil && change == nil || was != nil && change != nil && proto.Equal(was, change) {
			continue // unchanged (not outside, or outside as committed): the record stands
		}
		c.undo = append(c.undo, laneUndo{k: k, id: id, was: was})
		if change != nil {
			k.committed[id] = change
		} else {
			delete(k.committed, id)
		}
		if !slices.Contains(dirty, k) {
			dirty = append(dirty, k)
		}
	}
	clear(c.popped)
	c.popped = c.popped[:0]
	for _, k := range dirty {
		key := lanes.RecordKey(k.lane.id, k.key)
		if len(k.committed) == 0 {
			outs = append(outs, &kgo.Record{Topic: c.topic, Key: []byte(key)})
			continue
		}
		rec := &hooklinev1.LaneRecord{EndpointId: k.lane.id, OrderingKey: k.key}
		for _, m := range k.committed {
			rec.Outside = append(rec.Outside, m)
		}
		slices.SortFunc(rec.Outside, func(a, b *hooklinev1.LaneMember) int { return int(min(max(a.GetLaneSeq()-b.GetLaneSeq(), -1), 1)) })
		outs = append(outs, c.writer.records(c.topic, key, rec)...)
	}
	return outs
}

// ended ends a commit for the lanes: kept when it committed, taken back
// when it aborted.
func (c *laneCommit) ended(committed bool) {
	if !committed {
		for i := len(c.undo) - 1; i >= 0; i-- {
			u := c.undo[i]
			if u.was != nil {
				u.k.committed[u.id] = u.was
			} else {
				delete(u.k.committed, u.id)
			}
		}
	}
	clear(c.undo)
	c.undo = c.undo[:0]
}

// memberBound is the most one member that is not a blocked head takes in
// a LaneRecord: field tags and lengths, a delivery id, its lane_seq.
const memberBound = 16 + 64

// fits reports whether k's lanes record stays under recordLimit with
// m, a member of k just settled outside (or blocked), in it; if not, it
// says why. Its cost is a count while the lane is far from the limit,
// and a pass over the lane's outside members near it.
func (c *laneCommit) fits(k *keyLane, m *hooklinev1.LaneMember) (string, bool) {
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
	return fmt.Sprintf("its ordered lane's record (%s) would be %d bytes with it outside, over the %d-byte limit", c.topic, n, recordLimit), false
}
