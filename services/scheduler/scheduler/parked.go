package scheduler

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The parked index: per owned partition of the parked topic, the
// deliveries parked there and not released yet (docs/DESIGN.md "Paused
// endpoints hold in a parked topic", I45). It is built by reading the
// partition from its start, so it holds what the log says: a park record
// adds its key, a later park record of the same key replaces it, a
// tombstone removes it. Nothing in it may be released before the
// partition is caught up (caughtUp): a record read early may have its
// tombstone, written by a previous owner, further on in the log.
//
// Not safe for concurrent use: the Service guards it with pmu.

// parkedEntry is one parked delivery.
type parkedEntry struct {
	key      string
	rec      *kgo.Record // detached copy of the park record
	offset   int64
	endpoint string
	due      time.Time // the end of its hold: released then whatever the endpoint says
	// lane is set for a member parked behind its lane's blocked head
	// (lanes.ParkedBehindHeader): released when the lane is no longer
	// blocked before it, not when the endpoint resumes.
	lane *parkedLane
	// releasing is set while a hop that releases it is in flight.
	releasing bool
}

// parkedLane is the lane a parked member waits in, and its place there.
type parkedLane struct {
	key string // the lane's ordering key ("" for a per_endpoint lane)
	seq int64  // the member's lane_seq
}

// parkedPartition is the index of one owned parked partition.
type parkedPartition struct {
	byKey      map[string]*parkedEntry
	byEndpoint map[string]map[string]struct{}
	// caughtUp is set when the partition read back marker, the last sync
	// marker a committed hop of this session wrote to it; needMarker when
	// none is written yet (or its hop aborted).
	caughtUp   bool
	needMarker bool
	marker     string
}

func newParkedPartition() *parkedPartition {
	return &parkedPartition{byKey: map[string]*parkedEntry{}, byEndpoint: map[string]map[string]struct{}{}, needMarker: true}
}

// parkedIndex is every owned parked partition's index.
type parkedIndex struct {
	parts map[int32]*parkedPartition
	size  int
}

func newParkedIndex() *parkedIndex { return &parkedIndex{parts: map[int32]*parkedPartition{}} }

// assign starts an empty, not caught up, index for partition p.
func (x *parkedIndex) assign(p int32) {
	x.drop(p)
	x.parts[p] = newParkedPartition()
}

// drop forgets partition p (revoked, lost, or rewound to be read again).
func (x *parkedIndex) drop(p int32) {
	if pp, ok := x.parts[p]; ok {
		x.size -= len(pp.byKey)
		delete(x.parts, p)
	}
}

// add indexes e in partition p, replacing an entry of the same key at an
// earlier offset; a record at an offset not later than the entry's (read
// again) changes nothing. It reports whether e is in the index.
func (x *parkedIndex) add(p int32, e *parkedEntry) bool {
	pp := x.parts[p]
	if pp == nil {
		return false // not owned
	}
	if old, ok := pp.byKey[e.key]; ok {
		if e.offset <= old.offset {
			return false
		}
		pp.remove(old)
		x.size--
	}
	pp.byKey[e.key] = e
	keys := pp.byEndpoint[e.endpoint]
	if keys == nil {
		keys = map[string]struct{}{}
		pp.byEndpoint[e.endpoint] = keys
	}
	keys[e.key] = struct{}{}
	x.size++
	return true
}

// tombstone removes key from partition p if its entry is older than
// offset.
func (x *parkedIndex) tombstone(p int32, key string, offset int64) {
	pp := x.parts[p]
	if pp == nil {
		return
	}
	if e, ok := pp.byKey[key]; ok && e.offset < offset {
		pp.remove(e)
		x.size--
	}
}

// released removes e, released by a committed hop, unless a later park
// of its key replaced it meanwhile.
func (x *parkedIndex) released(p int32, e *parkedEntry) {
	pp := x.parts[p]
	if pp == nil {
		return
	}
	if cur, ok := pp.byKey[e.key]; ok && cur == e {
		pp.remove(e)
		x.size--
	}
}

func (pp *parkedPartition) remove(e *parkedEntry) {
	delete(pp.byKey, e.key)
	if keys := pp.byEndpoint[e.endpoint]; keys != nil {
		delete(keys, e.key)
		if len(keys) == 0 {
			delete(pp.byEndpoint, e.endpoint)
		}
	}
}

// endpointState is what the endpoints view says of an endpoint for the
// parked deliveries: hold them (paused), release them (no longer
// paused), or release them all, the members behind a blocked head
// included (gone).
type endpointState int

const (
	endpointPaused endpointState = iota
	endpointReleased
	endpointGone
)

// parkedPick is an entry chosen for release and the partition it is in.
type parkedPick struct {
	p int32
	e *parkedEntry
	// overflow is set for an entry over the memory bound: forwarded to
	// the retries topic (the recheck path) instead of released.
	overflow bool
}

// pick chooses, in caught-up partitions only, at most limit entries not
// already releasing: every entry of an endpoint that state says is no
// longer held (state is nil while the endpoints view is not synced:
// then only expiries), every entry whose hold is over (due ≤ now), and
// every member parked behind a blocked head that blocked says is no
// longer blocked (blocked is nil while the lanes view is not synced),
// or whose endpoint is gone. Then, while the index is over maxEntries,
// the overflow. Deterministic: partitions, endpoints and keys in sorted
// order.
func (x *parkedIndex) pick(now time.Time, state func(endpoint string) endpointState, blocked func(endpoint string, l *parkedLane) bool, limit, maxEntries int) []parkedPick {
	var out []parkedPick
	if state == nil {
		blocked = nil // the lanes view is read with the endpoints view's ordering modes
	}
	parts := make([]int32, 0, len(x.parts))
	for p := range x.parts {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	picked := 0
	for _, p := range parts {
		pp := x.parts[p]
		if !pp.caughtUp {
			continue
		}
		eps := make([]string, 0, len(pp.byEndpoint))
		for ep := range pp.byEndpoint {
			eps = append(eps, ep)
		}
		slices.Sort(eps)
		for _, ep := range eps {
			st := endpointPaused
			if state != nil {
				st = state(ep)
			}
			var order []string
			for k := range pp.byEndpoint[ep] {
				if e := pp.byKey[k]; !e.releasing && e.free(ep, st, blocked, now) {
					order = append(order, k)
				}
			}
			slices.Sort(order)
			for _, k := range order {
				if len(out) >= limit {
					return out
				}
				out = append(out, parkedPick{p: p, e: pp.byKey[k]})
				picked++
			}
		}
	}
	// The memory bound: what is over it goes back to the recheck path.
	// Only from caught-up partitions (a record read early may be
	// released already), so while partitions catch up the index may
	// exceed it.
	over := x.size - maxEntries
	for _, p := range parts {
		pp := x.parts[p]
		if over <= picked || !pp.caughtUp {
			continue
		}
		for _, k := range sortedKeys(pp.byKey) {
			if len(out) >= limit || over <= picked {
				break
			}
			if e := pp.byKey[k]; !e.releasing {
				out = append(out, parkedPick{p: p, e: e, overflow: true})
				picked++
			}
		}
	}
	return out
}

// free reports whether e, parked for endpoint ep (whose state is st),
// may go now.
func (e *parkedEntry) free(ep string, st endpointState, blocked func(string, *parkedLane) bool, now time.Time) bool {
	switch {
	case !e.due.After(now), st == endpointGone:
		return true
	case e.lane != nil:
		return blocked != nil && !blocked(ep, e.lane)
	default:
		return st == endpointReleased
	}
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// pending reports whether anything is indexed or a marker is to be
// written or read back: the poll loop then wakes at least every tick.
func (x *parkedIndex) pending() bool {
	if x.size > 0 {
		return true
	}
	for _, pp := range x.parts {
		if !pp.caughtUp {
			return true
		}
	}
	return false
}

// needMarkers returns the partitions whose sync marker is to be written.
func (x *parkedIndex) needMarkers() []int32 {
	var out []int32
	for p, pp := range x.parts {
		if pp.needMarker {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}
