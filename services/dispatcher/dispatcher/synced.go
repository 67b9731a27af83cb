package dispatcher

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// syncedBalancer is the group's cooperative-sticky balancer that also
// remembers the assignment the last SyncGroup gave this member, so that
// the loop knows, when a partition callback waits, which partitions it
// revokes (yield.go). Safe for concurrent use.
type syncedBalancer struct {
	kgo.GroupBalancer
	topic string

	mu       sync.Mutex
	assigned map[tp]bool
	ok       bool
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
	b.mu.Unlock()
	return m, nil
}

// last is the assignment the last SyncGroup gave (ok false before any).
func (b *syncedBalancer) last() (map[tp]bool, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.assigned, b.ok
}
