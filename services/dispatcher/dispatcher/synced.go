package dispatcher

import (
	"maps"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// syncedBalancer is the group's cooperative-sticky balancer that also
// remembers the assignment the last SyncGroup gave this member, so that
// the loop knows, when a partition callback waits, which partitions it
// revokes (yield.go), and that asks for partitions back when it joins
// again: a lost session's, and a restarted static instance's (askBack).
// Safe for concurrent use.
type syncedBalancer struct {
	kgo.GroupBalancer
	topic string

	mu       sync.Mutex
	assigned map[tp]bool
	ok       bool

	// The partitions of the deliveries topic this member asks back (a
	// failed group session lost them, or the group still assigns them
	// to this restarted instance), and the generation they were owned
	// in, until a SyncGroup answers the join that asks for them.
	lost    []int32
	lostGen int32
}

func newSyncedBalancer(topic string) *syncedBalancer {
	return &syncedBalancer{GroupBalancer: kgo.CooperativeStickyBalancer(), topic: topic}
}

// ParseSyncAssignment decodes this member's assignment, as the wrapped
// balancer does, and remembers it.
func (b *syncedBalancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	m, err := b.GroupBalancer.ParseSyncAssignment(assignment)
	if err != nil {
		return m, err
	}
	got := map[tp]bool{}
	for _, p := range m[b.topic] {
		got[tp{b.topic, p}] = true
	}
	b.mu.Lock()
	b.assigned, b.ok = got, true
	b.lost = nil // the join that asked for them is answered
	b.mu.Unlock()
	return m, nil
}

// askBack records partitions the next join asks for back, and the
// generation they were owned in: those a failed group session lost (the
// OnPartitionsLost callback), and those the group still assigns a static
// instance that restarted (rejoin.go).
//
// A session fails when the group's coordinator dies or cannot be
// reached: every member's does at once, and franz-go then joins again
// naming no owned partition (a lost member owns nothing). The leader's
// cooperative-sticky balancer, knowing no owner, assigns afresh, and a
// partition may move to another member: what this member completed on
// it and could not commit (the coordinator was gone) is then POSTed
// again by a dispatcher that never saw the receiver's answer, where
// this one would have settled it from the answer it kept (answered.go).
// The chaos storm's coordinator kill re-POSTed 17 deliveries so
// (docs/reliability.md, "The storm row, attributed").
//
// So the next join tells the leader what this member owned, as the
// sticky balancer's history (its user data, with the generation it
// was owned in), not as owned partitions: the plan gives them back
// when nothing newer claims them, and a member that owns one for real
// in a later generation keeps it (the sticky balancer keeps the higher
// generation). Not claiming them as owned keeps the cooperative
// protocol's two-step hand-off honest: a partition planned elsewhere is
// not held back waiting for this member to revoke what it does not
// have, which nothing would ever do.
func (b *syncedBalancer) askBack(parts []int32, gen int32) {
	if len(parts) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lost = slices.Compact(slices.Sorted(slices.Values(append(b.lost, parts...))))
	b.lostGen = max(b.lostGen, gen)
}

// JoinGroupMetadata is the wrapped balancer's, with the partitions asked
// back as this member's sticky history when it owns none of the topic
// now (askBack).
func (b *syncedBalancer) JoinGroupMetadata(interests []string, current map[string][]int32, gen int32) []byte {
	b.mu.Lock()
	lost, lostGen := slices.Clone(b.lost), b.lostGen
	b.mu.Unlock()
	if len(lost) == 0 || len(current[b.topic]) > 0 || lostGen < 0 {
		return b.GroupBalancer.JoinGroupMetadata(interests, current, gen)
	}
	history := maps.Clone(current)
	if history == nil {
		history = map[string][]int32{}
	}
	history[b.topic] = lost
	raw := b.GroupBalancer.JoinGroupMetadata(interests, history, lostGen)
	meta := kmsg.NewConsumerMemberMetadata()
	if err := meta.ReadFrom(raw); err != nil {
		return b.GroupBalancer.JoinGroupMetadata(interests, current, gen)
	}
	// Owned partitions are what the member consumes now: the ones it
	// really has, none of the lost. A generation of -1 makes the sticky
	// balancer read the history from the user data.
	owned := meta.OwnedPartitions[:0]
	for _, o := range meta.OwnedPartitions {
		if o.Topic != b.topic {
			owned = append(owned, o)
		}
	}
	meta.OwnedPartitions, meta.Generation = owned, -1
	return meta.AppendTo(nil)
}

// last is the assignment the last SyncGroup gave (ok false before any).
func (b *syncedBalancer) last() (map[tp]bool, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.assigned, b.ok
}
