package receiver

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// Store remembers which webhook-ids were taken, so a redelivery of one is
// answered 2xx and does nothing. Implementations must make Claim atomic:
// of two concurrent claims of one id, exactly one wins. A shared store
// (Redis SET NX with a TTL, a unique key in a database) deduplicates
// across replicas; the default MemoryStore only within one process.
type Store interface {
	// Claim records id and reports whether this call took it (true) or
	// it was already taken (false).
	Claim(ctx context.Context, id string) (bool, error)
	// Release forgets id, so its next delivery is processed again.
	Release(ctx context.Context, id string) error
}

// MemoryStore is an in-memory Store bounded in size and age: an id is
// forgotten TTL after it was claimed, or earlier when Capacity newer ids
// were claimed since. It is safe for concurrent use.
type MemoryStore struct {
	ttl      time.Duration
	capacity int
	now      func() time.Time

	mu    sync.Mutex
	ids   map[string]*list.Element
	order *list.List // of claim, oldest first
}

type claim struct {
	id string
	at time.Time
}

// DefaultTTL covers Hookline's longest default retry horizon (72 h) with
// room to spare.
const DefaultTTL = 96 * time.Hour

// DefaultCapacity bounds the default store at about 100k ids.
const DefaultCapacity = 100_000

// NewMemoryStore returns a MemoryStore; ttl ≤ 0 means DefaultTTL,
// capacity ≤ 0 DefaultCapacity, now nil time.Now.
func NewMemoryStore(ttl time.Duration, capacity int, now func() time.Time) *MemoryStore {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if capacity <= 0 {
		capacity = DefaultCapacity
	}
	if now == nil {
		now = time.Now
	}
	return &MemoryStore{ttl: ttl, capacity: capacity, now: now, ids: map[string]*list.Element{}, order: list.New()}
}

// Claim implements Store.
func (s *MemoryStore) Claim(_ context.Context, id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	// Claims share one TTL, so the oldest expire first.
	for e := s.order.Front(); e != nil && now.Sub(e.Value.(claim).at) >= s.ttl; e = s.order.Front() {
		s.remove(e)
	}
	if _, ok := s.ids[id]; ok {
		return false, nil
	}
	if s.order.Len() >= s.capacity {
		s.remove(s.order.Front())
	}
	s.ids[id] = s.order.PushBack(claim{id: id, at: now})
	return true, nil
}

// Release implements Store.
func (s *MemoryStore) Release(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.ids[id]; ok {
		s.remove(e)
	}
	return nil
}

// Len returns how many ids are remembered.
func (s *MemoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.order.Len()
}

func (s *MemoryStore) remove(e *list.Element) {
	delete(s.ids, e.Value.(claim).id)
	s.order.Remove(e)
}
