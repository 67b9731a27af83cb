// Package lanes reads the lanes topic: the durable part of ordered
// delivery's lanes (docs/DESIGN.md, "Ordered delivery"). For each lane,
// an (endpoint, ordering key) pair, the topic holds one LaneRecord: the
// members outside the dispatcher's memory as of its committed watermark,
// and the lane's blocked head if it has one — by reference: the view
// holds no payload (a blocked head's is read back with payloadref). The dispatcher writes it
// and seeds its lanes from it; ingest answers LaneService from it.
package lanes

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

// RecordKey is the lanes topic's key of (endpoint, key): length-prefixed,
// so no pair collides with another.
func RecordKey(endpoint, key string) string {
	return strconv.Itoa(len(endpoint)) + ":" + endpoint + ":" + key
}

// ParseRecordKey reverses RecordKey.
func ParseRecordKey(k string) (endpoint, key string, ok bool) {
	n, rest, found := strings.Cut(k, ":")
	size, err := strconv.Atoi(n)
	if !found || err != nil || size < 0 || len(rest) < size+1 || rest[size] != ':' {
		return "", "", false
	}
	return rest[:size], rest[size+1:], true
}

// Members are a lane's members outside memory, by delivery id. The
// LaneMember values are shared and must not be changed.
type Members map[string]*hooklinev1.LaneMember

// View is what the lanes topic says, per endpoint and key. Feed it with
// Apply (a kafka.Follower's apply function). Safe for concurrent use.
type View struct {
	mu sync.Mutex
	m  map[string]map[string]Members
}

// NewView returns an empty view.
func NewView() *View { return &View{m: map[string]map[string]Members{}} }

// Apply folds one lanes record in (a tombstone empties its lane); a
// record that does not decode is ignored.
func (v *View) Apply(r *kgo.Record) {
	ep, key, ok := ParseRecordKey(string(r.Key))
	if !ok {
		return
	}
	var members Members
	if r.Value != nil {
		var rec hooklinev1.LaneRecord
		if hkafka.Decode(r, &rec) != nil {
			return
		}
		members = make(Members, len(rec.GetOutside()))
		for _, m := range rec.GetOutside() {
			if b := m.GetBlocked(); b.GetDeliveryRecord() != nil && len(b.GetDelivery().GetPayload()) > 0 {
				// The payload lives where delivery_record says: the view
				// never holds it (payloadref reads it back when needed).
				b.GetDelivery().Payload = nil
			}
			members[m.GetDeliveryId()] = m
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
		v.m[ep] = map[string]Members{}
	}
	v.m[ep][key] = members
}

// Snapshot returns a copy of endpoint's lanes, by ordering key (nil when
// it has none).
func (v *View) Snapshot(endpoint string) map[string]Members {
	v.mu.Lock()
	defer v.mu.Unlock()
	lanes := v.m[endpoint]
	if len(lanes) == 0 {
		return nil
	}
	out := make(map[string]Members, len(lanes))
	for k, members := range lanes {
		c := make(Members, len(members))
		for id, m := range members {
			c[id] = m
		}
		out[k] = c
	}
	return out
}

// Blocked is one blocked lane as the view knows it.
type Blocked struct {
	Key  string
	Head *hooklinev1.LaneMember // Head.Blocked is set
	// Followers counts the lane's other members outside memory published
	// after the head.
	Followers int
}

// Blocked returns endpoint's blocked lanes whose key is after `after`
// (all when after is nil), sorted by key.
func (v *View) Blocked(endpoint string, after *string) []Blocked {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []Blocked
	for key, members := range v.m[endpoint] {
		if after != nil && key <= *after {
			continue
		}
		var head *hooklinev1.LaneMember
		for _, m := range members {
			if m.GetBlocked() != nil {
				head = m
				break
			}
		}
		if head == nil {
			continue
		}
		b := Blocked{Key: key, Head: head}
		for _, m := range members {
			if m.GetLaneSeq() > head.GetLaneSeq() {
				b.Followers++
			}
		}
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b Blocked) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// BlockedBefore reports whether endpoint's lane key has a blocked head
// before lane_seq seq: a member at seq waits for an operator's command
// (the scheduler holds such members parked until it reports false).
func (v *View) BlockedBefore(endpoint, key string, seq int64) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, m := range v.m[endpoint][key] {
		if m.GetBlocked() != nil && m.GetLaneSeq() < seq {
			return true
		}
	}
	return false
}
