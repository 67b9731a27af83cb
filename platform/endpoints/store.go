// Package endpoints materialises the compacted endpoints topic into an
// in-memory view that ingest and the dispatcher read. Kafka is the only
// truth: the view is rebuilt from the topic at every start, and a service
// serves only after the view has caught up with the topic's end offsets
// as they were when it started.
package endpoints

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/filter"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Store is the materialised view of the endpoints topic. It is safe for
// concurrent use. Records it returns are shared: callers must not modify
// them (proto.Clone before changing).
type Store struct {
	mu       sync.RWMutex
	byID     map[string]*hooklinev1.EndpointRecord
	byTenant map[string]map[string]*hooklinev1.EndpointRecord

	ready     chan struct{}
	readyOnce sync.Once

	// follow reads the topic (read_committed: the dispatcher writes
	// auto-pauses inside its transactions); set by Run before
	// followReady is closed.
	follow      *hkafka.Follower
	topic       string
	followReady chan struct{}
}

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{
		byID:        map[string]*hooklinev1.EndpointRecord{},
		byTenant:    map[string]map[string]*hooklinev1.EndpointRecord{},
		ready:       make(chan struct{}),
		followReady: make(chan struct{}),
	}
}

// Start runs the store in the background and waits until it is ready.
// It returns an error if the store fails first or ctx ends first. The
// store keeps following the topic until stop is called; failed reports
// an error that stops it later.
func (s *Store) Start(ctx context.Context, cfg hkafka.Config) (stop func(), failed <-chan error, err error) {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		defer close(done)
		if err := s.Run(runCtx, cfg); err != nil {
			errc <- err
		}
	}()
	stop = func() {
		cancel()
		<-done
	}
	select {
	case <-s.ready:
		return stop, errc, nil
	case err := <-errc:
		stop()
		return nil, nil, err
	case <-ctx.Done():
		stop()
		return nil, nil, ctx.Err()
	}
}

// Run consumes the endpoints topic from its start until ctx ends,
// applying every committed record. It marks the store ready once it has
// read every record committed before Run began. cfg gives the connection
// settings and the topic name. Run may be called once.
func (s *Store) Run(ctx context.Context, cfg hkafka.Config) error {
	s.topic = cfg.Topics().Endpoints
	s.follow = hkafka.NewFollower(s.applyRecord, s.topic)
	close(s.followReady)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- s.follow.Run(ctx, cfg)
		cancel() // a failed reader ends the catch-up below
	}()
	if err := s.follow.Sync(ctx, s.topic); err != nil && ctx.Err() == nil {
		cancel()
		if rerr := <-done; rerr != nil {
			err = rerr // the reader's own failure says more
		}
		return fmt.Errorf("endpoints: %w", err)
	}
	if ctx.Err() == nil {
		s.readyOnce.Do(func() { close(s.ready) })
	}
	if err := <-done; err != nil {
		return fmt.Errorf("endpoints: %w", err)
	}
	return nil
}

// Sync waits until the view holds every endpoint record committed before
// Sync was called: it reads the topic's last stable offsets now and waits
// for the reader to pass them. A service calls it when it meets an
// endpoint id it does not know, to tell "not seen yet" from "deleted".
func (s *Store) Sync(ctx context.Context) error {
	select {
	case <-s.followReady:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := s.follow.Sync(ctx, s.topic); err != nil {
		return fmt.Errorf("endpoints: %w", err)
	}
	return nil
}

func (s *Store) applyRecord(r *kgo.Record) {
	id := string(r.Key)
	if r.Value == nil {
		s.Delete(id)
		return
	}
	var rec hooklinev1.EndpointRecord
	if err := hkafka.Decode(r, &rec); err != nil || rec.GetEndpoint().GetId() != id {
		// A record that is not an endpoint cannot be served; skipping it
		// keeps the view of every other endpoint correct.
		return
	}
	s.Put(&rec)
}

// Put applies rec unless the view already holds a newer version. Writers
// call it after their produce succeeded, so a replica reads its own writes
// before the consumer sees them.
func (s *Store) Put(rec *hooklinev1.EndpointRecord) {
	ep := rec.GetEndpoint()
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.byID[ep.GetId()]; ok && cur.GetVersion() > rec.GetVersion() {
		return
	}
	s.byID[ep.GetId()] = rec
	t := s.byTenant[ep.GetTenantId()]
	if t == nil {
		t = map[string]*hooklinev1.EndpointRecord{}
		s.byTenant[ep.GetTenantId()] = t
	}
	t[ep.GetId()] = rec
}

// Delete removes an endpoint from the view.
func (s *Store) Delete(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.byID[id]
	if !ok {
		return
	}
	delete(s.byID, id)
	delete(s.byTenant[cur.GetEndpoint().GetTenantId()], id)
}

// Get returns the endpoint with id, or nil.
func (s *Store) Get(id string) *hooklinev1.EndpointRecord {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.byID[id]
}

// List returns the tenant's endpoints ordered by id.
func (s *Store) List(tenant string) []*hooklinev1.EndpointRecord {
	s.mu.RLock()
	out := make([]*hooklinev1.EndpointRecord, 0, len(s.byTenant[tenant]))
	for _, r := range s.byTenant[tenant] {
		out = append(out, r)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b *hooklinev1.EndpointRecord) int {
		return strings.Compare(a.GetEndpoint().GetId(), b.GetEndpoint().GetId())
	})
	return out
}

// Matching returns the tenant's endpoints whose filter matches eventType,
// ordered by id. Paused endpoints are included: their deliveries are
// held, not skipped (SPEC R-ENDPOINT-2).
func (s *Store) Matching(tenant, eventType string) []*hooklinev1.EndpointRecord {
	all := s.List(tenant)
	out := all[:0]
	for _, r := range all {
		if filter.Match(r.GetEndpoint().GetEventTypes(), eventType) {
			out = append(out, r)
		}
	}
	return out
}

// Count returns how many endpoints the tenant has.
func (s *Store) Count(tenant string) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.byTenant[tenant])
}
