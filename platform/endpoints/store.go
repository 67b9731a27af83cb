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
	"github.com/twmb/franz-go/pkg/kadm"
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

	// pos is, per partition, the offset after the last record applied;
	// advanced is closed and replaced whenever pos moves.
	posMu    sync.Mutex
	pos      map[int32]int64
	advanced chan struct{}
	adm      *kadm.Client
	topic    string
	admReady chan struct{}
}

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{
		byID:     map[string]*hooklinev1.EndpointRecord{},
		byTenant: map[string]map[string]*hooklinev1.EndpointRecord{},
		ready:    make(chan struct{}),
		pos:      map[int32]int64{},
		advanced: make(chan struct{}),
		admReady: make(chan struct{}),
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
// applying every record. It marks the store ready once it has read up to
// the end offsets that the topic had when Run began. cfg gives the
// connection settings and the topic name.
func (s *Store) Run(ctx context.Context, cfg hkafka.Config) error {
	opts, err := cfg.Opts()
	if err != nil {
		return err
	}
	topic := cfg.Topics().Endpoints
	cl, err := kgo.NewClient(append(opts,
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)...)
	if err != nil {
		return fmt.Errorf("endpoints: client: %w", err)
	}
	defer cl.Close()
	s.adm, s.topic = kadm.NewClient(cl), topic
	close(s.admReady)

	ends, err := s.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("endpoints: end offsets of %s: %w", topic, err)
	}
	if err := ends.Error(); err != nil {
		return fmt.Errorf("endpoints: end offsets of %s: %w", topic, err)
	}
	// behind holds, per partition, the offset the view must reach.
	behind := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			behind[o.Partition] = o.Offset
		}
	})
	s.maybeReady(behind)

	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil //nolint:nilerr // stopping is not a failure
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			ferr = fmt.Errorf("endpoints: fetch %s/%d: %w", t, p, err)
		})
		if ferr != nil {
			return ferr
		}
		s.posMu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			s.applyRecord(r)
			s.pos[r.Partition] = r.Offset + 1
			if end, ok := behind[r.Partition]; ok && r.Offset+1 >= end {
				delete(behind, r.Partition)
			}
		})
		close(s.advanced)
		s.advanced = make(chan struct{})
		s.posMu.Unlock()
		s.maybeReady(behind)
	}
}

func (s *Store) maybeReady(behind map[int32]int64) {
	if len(behind) == 0 {
		s.readyOnce.Do(func() { close(s.ready) })
	}
}

// Ready is closed once the view has caught up with the topic.
func (s *Store) Ready() <-chan struct{} { return s.ready }

// WaitReady blocks until the view has caught up or ctx ends.
func (s *Store) WaitReady(ctx context.Context) error {
	select {
	case <-s.ready:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("endpoints: waiting for the endpoints topic to be read: %w", ctx.Err())
	}
}

// Sync waits until the view holds every endpoint record written before
// Sync was called: it reads the topic's end offsets now and waits for the
// consumer to pass them. A service calls it when it meets an endpoint id
// it does not know, to tell "not seen yet" from "deleted".
func (s *Store) Sync(ctx context.Context) error {
	select {
	case <-s.admReady:
	case <-ctx.Done():
		return ctx.Err()
	}
	ends, err := s.adm.ListEndOffsets(ctx, s.topic)
	if err != nil {
		return fmt.Errorf("endpoints: sync: %w", err)
	}
	if err := ends.Error(); err != nil {
		return fmt.Errorf("endpoints: sync: %w", err)
	}
	for {
		s.posMu.Lock()
		caughtUp := true
		ends.Each(func(o kadm.ListedOffset) {
			if o.Offset > 0 && s.pos[o.Partition] < o.Offset {
				caughtUp = false
			}
		})
		wait := s.advanced
		s.posMu.Unlock()
		if caughtUp {
			return nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return fmt.Errorf("endpoints: sync: %w", ctx.Err())
		}
	}
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
