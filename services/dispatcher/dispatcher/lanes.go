package dispatcher

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The lanes topic holds the durable part of ordered lanes (ordered.go):
// for each lane, the members outside memory, as of the committed
// watermark. The engine writes a lane's record in the commit whose
// prefix changed it (laneOutputs); every dispatcher follows the topic
// (laneView) and seeds an endpoint's lanes from it the first time it
// places one of the endpoint's deliveries after an assignment.

// laneRecordKey is the lanes topic's key of (endpoint, key):
// length-prefixed, so no pair collides with another.
func laneRecordKey(endpoint, key string) string {
	return strconv.Itoa(len(endpoint)) + ":" + endpoint + ":" + key
}

// parseLaneRecordKey reverses laneRecordKey.
func parseLaneRecordKey(k string) (endpoint, key string, ok bool) {
	n, rest, found := strings.Cut(k, ":")
	size, err := strconv.Atoi(n)
	if !found || err != nil || size < 0 || len(rest) < size+1 || rest[size] != ':' {
		return "", "", false
	}
	return rest[:size], rest[size+1:], true
}

// laneView is what the lanes topic says, per endpoint and key: the
// members outside memory (delivery id → lane_seq).
type laneView struct {
	mu sync.Mutex
	m  map[string]map[string]map[string]int64
}

func newLaneView() *laneView { return &laneView{m: map[string]map[string]map[string]int64{}} }

// apply folds one lanes record in (a tombstone empties its lane).
func (v *laneView) apply(r *kgo.Record) {
	ep, key, ok := parseLaneRecordKey(string(r.Key))
	if !ok {
		return
	}
	var members map[string]int64
	if r.Value != nil {
		var rec hooklinev1.LaneRecord
		if hkafka.Decode(r, &rec) != nil {
			return
		}
		members = make(map[string]int64, len(rec.GetOutside()))
		for _, m := range rec.GetOutside() {
			members[m.GetDeliveryId()] = m.GetLaneSeq()
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(members) == 0 {
		if lanes := v.m[ep]; lanes != nil {
			delete(lanes, key)
			if len(lanes) == 0 {
				delete(v.m, ep)
			}
		}
		return
	}
	if v.m[ep] == nil {
		v.m[ep] = map[string]map[string]int64{}
	}
	v.m[ep][key] = members
}

// snapshot returns a copy of endpoint's lanes.
func (v *laneView) snapshot(endpoint string) map[string]map[string]int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	lanes := v.m[endpoint]
	if len(lanes) == 0 {
		return nil
	}
	out := make(map[string]map[string]int64, len(lanes))
	for k, members := range lanes {
		out[k] = copyMembers(members)
	}
	return out
}

func copyMembers(m map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// syncLanes waits until the lanes view holds every lane record committed
// so far (bounded by ctx).
func (s *Service) syncLanes(ctx context.Context) error {
	return s.laneFollow.Sync(ctx, s.topics.Lanes)
}

// laneUndo is one change a commit made to a keyLane's committed list,
// taken back if the transaction aborts.
type laneUndo struct {
	k   *keyLane
	id  string
	seq int64
	had bool
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
		seq, had := k.committed[id]
		e.undo = append(e.undo, laneUndo{k: k, id: id, seq: seq, had: had})
		if en.opOut {
			k.committed[id] = en.d.GetLaneSeq()
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
		key := laneRecordKey(k.lane.id, k.key)
		if len(k.committed) == 0 {
			outs = append(outs, &kgo.Record{Topic: e.s.topics.Lanes, Key: []byte(key)})
			continue
		}
		rec := &hooklinev1.LaneRecord{EndpointId: k.lane.id, OrderingKey: k.key}
		for id, seq := range k.committed {
			rec.Outside = append(rec.Outside, &hooklinev1.LaneMember{DeliveryId: id, LaneSeq: seq})
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
			if u.had {
				u.k.committed[u.id] = u.seq
			} else {
				delete(u.k.committed, u.id)
			}
		}
	}
	clear(e.undo)
	e.undo = e.undo[:0]
}
