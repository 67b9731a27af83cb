// Package endpoints materialises the compacted endpoints topic into an
// in-memory view that ingest and the dispatcher read. Kafka is the only
// truth: the view is rebuilt from the topic at every start, and a service
// serves only after the view has caught up with the topic's end offsets
// as they were when it started.
//
// Writes to the topic are conditional, decided in log order (see
// DESIGN.md, "Endpoint writes are conditional"). For each endpoint id,
// in offset order, a record with a value is applied only if
//
//   - the view does not know the id (a create; or the first record a
//     reader sees after compaction removed the older ones), or
//   - its version is exactly the current version + 1, or
//   - it is a re-assertion of the current version (see Repair);
//
// and never to an id deleted less than DeletedMemory earlier in log time.
// A tombstone always applies. Every other record loses: every reader
// ignores it, because every reader applies the same records in the same
// order. A writer learns whether it won with Write.
package endpoints

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DeletedMemory is how long, in log time (record timestamps of the
// endpoint's partition), the view remembers that an endpoint was deleted
// and refuses records written for it from an older state. It equals the
// topic's delete.retention.ms: after that compaction may drop the
// tombstone itself, and a reader rebuilding from the topic could not
// remember either.
const DeletedMemory = 24 * time.Hour

// writeHeader carries a write's id, so its writer can tell its own
// record's outcome from any other's.
const writeHeader = "hookline-write"

// reassertHeader marks a re-assertion: the current record written again
// to settle a key whose last record lost (see Repair).
const reassertHeader = "hookline-reassert"

// ErrLost is returned by Write when another write of the endpoint came
// first in the log: the record was written but every reader ignores it.
var ErrLost = errors.New("endpoints: a concurrent change came first")

// ErrUnconfirmed is returned (wrapped) by Write when the record was
// written but the view did not read it back in time: it may have won or
// lost.
var ErrUnconfirmed = errors.New("endpoints: change written but not read back")

// Outcome is what the view made of one record.
type Outcome int

// Outcomes of a record.
const (
	// Pending: not read yet.
	Pending Outcome = iota
	// Won: applied (or a re-assertion of the current state).
	Won
	// Lost: ignored, the record was based on a state that is not current.
	Lost
)

// entry is the view's state of one endpoint id.
type entry struct {
	rec       *hooklinev1.EndpointRecord // nil: deleted
	partition int32
	deletedAt time.Time // log time of the tombstone, when rec is nil
	// lost: the key's last record read so far lost; until a later record
	// settles the key, compaction could keep the loser (Repair).
	lost bool
}

// Store is the materialised view of the endpoints topic. It is safe for
// concurrent use. Records it returns are shared: callers must not modify
// them (proto.Clone before changing).
type Store struct {
	mu       sync.RWMutex
	byID     map[string]*entry
	byTenant map[string]map[string]*hooklinev1.EndpointRecord
	// provisional holds records Put applied ahead of the log; see Put.
	provisional map[string]*hooklinev1.EndpointRecord
	// logTime is, per partition, the latest record timestamp read; swept
	// is the log time of the partition's last sweep.
	logTime map[int32]time.Time
	swept   map[int32]time.Time
	// watches are the outcomes of writes in flight, by write id.
	watches map[string]Outcome
	// unsettled are the ids whose last record lost; settled is closed and
	// replaced when a key becomes unsettled.
	unsettled   map[string]struct{}
	unsettledCh chan struct{}

	ready     chan struct{}
	readyOnce sync.Once

	// follow reads the topic (read_committed: the dispatcher writes
	// auto-pauses inside its transactions); set by Run before
	// followReady is closed. runCtx is Run's context, for barrier rounds.
	follow      *hkafka.Follower
	topic       string
	runCtx      context.Context
	followReady chan struct{}

	barrier barrier

	// remembered are Matching's answers until the view changes
	// (matching.go).
	remembered answers
}

// NewStore returns an empty Store.
func NewStore() *Store {
	s := &Store{
		byID:        map[string]*entry{},
		byTenant:    map[string]map[string]*hooklinev1.EndpointRecord{},
		provisional: map[string]*hooklinev1.EndpointRecord{},
		logTime:     map[int32]time.Time{},
		swept:       map[int32]time.Time{},
		watches:     map[string]Outcome{},
		unsettled:   map[string]struct{}{},
		unsettledCh: make(chan struct{}),
		ready:       make(chan struct{}),
		followReady: make(chan struct{}),
	}
	s.barrier.sync = s.Sync
	return s
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

// StartWatched starts the store as Start does, and then calls failed
// with the error that stops it later, if one does, before stop is
// called: a service that must not go on with a stale view (a stale
// secret signing, a missed pause) ends its work there.
func (s *Store) StartWatched(ctx context.Context, cfg hkafka.Config, failed func(error)) (stop func(), err error) {
	stopStore, errc, err := s.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	quit := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case err := <-errc:
			failed(err)
		case <-quit:
		}
	}()
	return func() {
		close(quit)
		<-watched
		stopStore()
	}, nil
}

// Run consumes the endpoints topic from its start until ctx ends,
// applying every committed record. It marks the store ready once it has
// read every record committed before Run began. cfg gives the connection
// settings and the topic name. Run may be called once.
func (s *Store) Run(ctx context.Context, cfg hkafka.Config) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.topic = cfg.Topics().Endpoints
	s.follow = hkafka.NewFollower(s.applyRecord, s.topic)
	s.runCtx = ctx
	close(s.followReady)
	defer s.barrier.wait() // rounds end with ctx
	done := make(chan error, 1)
	go func() {
		done <- s.follow.Run(ctx, cfg)
		cancel() // a failed reader ends the catch-up below
	}()
	// The start-up catch-up may outlast one Sync's own bound
	// (kafka.DefaultSyncTimeout: a big topic, a broker still starting):
	// keep going until it succeeds, the reader fails or ctx ends.
	err := s.follow.Sync(ctx, s.topic)
	for errors.Is(err, hkafka.ErrSyncTimeout) && ctx.Err() == nil {
		err = s.follow.Sync(ctx, s.topic)
	}
	if err != nil && ctx.Err() == nil {
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
// Barrier does the same for many concurrent callers at the cost of one.
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
	var rec *hooklinev1.EndpointRecord
	if r.Value != nil {
		rec = &hooklinev1.EndpointRecord{}
		if err := hkafka.Decode(r, rec); err != nil || rec.GetEndpoint().GetId() != id {
			// A record that is not an endpoint cannot be served; skipping
			// it keeps the view of every other endpoint correct.
			return
		}
	}
	var writeID string
	reassert := false
	for _, h := range r.Headers {
		switch h.Key {
		case writeHeader:
			writeID = string(h.Value)
		case reassertHeader:
			reassert = true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Timestamp.After(s.logTime[r.Partition]) {
		s.logTime[r.Partition] = r.Timestamp
	}
	won := s.decideLocked(id, r.Partition, r.Timestamp, rec, reassert)
	if _, ok := s.watches[writeID]; ok && writeID != "" {
		s.watches[writeID] = Lost
		if won {
			s.watches[writeID] = Won
		}
	}
	if now := s.logTime[r.Partition]; now.Sub(s.swept[r.Partition]) > DeletedMemory/24 {
		s.swept[r.Partition] = now
		s.sweepLocked(r.Partition)
	}
}

// decideLocked applies one record of id in log order and reports whether
// it won; s.mu is held.
func (s *Store) decideLocked(id string, partition int32, at time.Time, rec *hooklinev1.EndpointRecord, reassert bool) bool {
	s.remembered.forget()
	cur := s.byID[id]
	if p := s.provisional[id]; p != nil && (rec == nil || rec.GetVersion() >= p.GetVersion()) {
		// The log has decided the version Put guessed at.
		delete(s.provisional, id)
	}
	if rec == nil { // a tombstone always applies
		if cur != nil && cur.rec != nil {
			s.unindexLocked(cur.rec)
		}
		s.byID[id] = &entry{partition: partition, deletedAt: at}
		s.settleLocked(id)
		return true
	}
	won := false
	switch {
	case cur == nil:
		won = true // a create, or history compacted away
	case cur.rec == nil:
		// Deleted: a record written from an older state must not bring
		// the endpoint back. Past the memory it is an unknown id again.
		won = !at.Before(cur.deletedAt.Add(DeletedMemory))
	case rec.GetVersion() == cur.rec.GetVersion()+1:
		won = true
	case reassert && rec.GetVersion() >= cur.rec.GetVersion():
		// Live, a re-assertion equals the current record and changes
		// nothing. A reader rebuilding after compaction may instead hold
		// a loser that compaction kept (the last record of the key in the
		// cleaned part of the log, with the winner's version, accepted
		// as the first record seen): the re-assertion replaces it.
		won = true
	}
	if !won {
		if cur != nil {
			cur.lost = true
		}
		s.unsettled[id] = struct{}{}
		close(s.unsettledCh)
		s.unsettledCh = make(chan struct{})
		return false
	}
	if cur != nil && cur.rec != nil {
		s.unindexLocked(cur.rec)
	}
	s.byID[id] = &entry{rec: rec, partition: partition}
	t := s.byTenant[rec.GetEndpoint().GetTenantId()]
	if t == nil {
		t = map[string]*hooklinev1.EndpointRecord{}
		s.byTenant[rec.GetEndpoint().GetTenantId()] = t
	}
	t[id] = rec
	s.settleLocked(id)
	return true
}

func (s *Store) settleLocked(id string) {
	if e := s.byID[id]; e != nil {
		e.lost = false
	}
	delete(s.unsettled, id)
}

// unindexLocked removes rec from the tenant index, and the tenant's map
// once it is empty.
func (s *Store) unindexLocked(rec *hooklinev1.EndpointRecord) {
	tenant := rec.GetEndpoint().GetTenantId()
	delete(s.byTenant[tenant], rec.GetEndpoint().GetId())
	if len(s.byTenant[tenant]) == 0 {
		delete(s.byTenant, tenant)
	}
}

// sweepLocked forgets deletions of partition older than DeletedMemory in
// its log time: decideLocked decides the same without them, so when a
// process sweeps does not change what it decides.
func (s *Store) sweepLocked(partition int32) {
	now := s.logTime[partition]
	for id, e := range s.byID {
		if e.rec == nil && e.partition == partition && !e.lost && !now.Before(e.deletedAt.Add(DeletedMemory)) {
			delete(s.byID, id)
		}
	}
}

// Write writes r (a record of the endpoints topic, value or tombstone)
// with produce and waits until the view has read it. It returns ErrLost
// if the record lost to a concurrent change (the view then holds the
// winner: re-read and decide again). A record that lost is left for
// Repair to settle. produce must set r's partition and offset.
func (s *Store) Write(ctx context.Context, r *kgo.Record, produce func(context.Context, *kgo.Record) error) error {
	select {
	case <-s.followReady:
	case <-ctx.Done():
		return ctx.Err()
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	writeID := hex.EncodeToString(b[:])
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: writeHeader, Value: []byte(writeID)})
	s.mu.Lock()
	s.watches[writeID] = Pending
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.watches, writeID)
		s.mu.Unlock()
	}()
	if err := produce(ctx, r); err != nil {
		return err
	}
	if err := s.follow.WaitPast(ctx, r.Topic, r.Partition, r.Offset); err != nil {
		return fmt.Errorf("%w: %w", ErrUnconfirmed, err)
	}
	s.mu.RLock()
	o := s.watches[writeID]
	s.mu.RUnlock()
	switch o {
	case Won:
		return nil
	case Lost:
		// Our record may be the key's last: settle the key before
		// answering, so compaction never keeps it (Repair is the safety
		// net if this process dies first).
		if err := s.settle(ctx, string(r.Key), produce); err != nil {
			return fmt.Errorf("%w (and re-asserting the winner failed: %w)", ErrLost, err)
		}
		return ErrLost
	default:
		// Passed but never applied: an aborted or undecodable record.
		return fmt.Errorf("%w: the record at %s/%d@%d was not applied", ErrUnconfirmed, r.Topic, r.Partition, r.Offset)
	}
}

// Tracked is a write of the endpoints topic that its writer makes itself
// (inside a Kafka transaction, say) and whose outcome the view records;
// see Track.
type Tracked struct {
	s  *Store
	id string
}

// Track tags r, an endpoints record the caller will write itself, so
// that the view records whether it wins. Once r is written (its Partition
// and Offset set), Outcome says how it fared; if it will never be
// written (its transaction aborted), call Forget. Safe for concurrent
// use.
func (s *Store) Track(r *kgo.Record) *Tracked {
	var b [12]byte
	_, _ = rand.Read(b[:])
	t := &Tracked{s: s, id: hex.EncodeToString(b[:])}
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: writeHeader, Value: []byte(t.id)})
	s.mu.Lock()
	s.watches[t.id] = Pending
	s.mu.Unlock()
	return t
}

// ID is the write id Track put in the record's headers.
func (t *Tracked) ID() string { return t.id }

// TrackedID returns the write id Track put in r's headers, or "".
func TrackedID(r *kgo.Record) string {
	for _, h := range r.Headers {
		if h.Key == writeHeader {
			return string(h.Value)
		}
	}
	return ""
}

// Outcome waits until the view has read r, written at r.Partition and
// r.Offset, and reports whether it won (Won), lost to a concurrent
// change (Lost), or was passed without being applied (Pending: an
// aborted or undecodable record). The tracking ends either way.
func (t *Tracked) Outcome(ctx context.Context, r *kgo.Record) (Outcome, error) {
	defer t.Forget()
	select {
	case <-t.s.followReady:
	case <-ctx.Done():
		return Pending, ctx.Err()
	}
	if err := t.s.follow.WaitPast(ctx, r.Topic, r.Partition, r.Offset); err != nil {
		return Pending, fmt.Errorf("%w: %w", ErrUnconfirmed, err)
	}
	t.s.mu.RLock()
	defer t.s.mu.RUnlock()
	return t.s.watches[t.id], nil
}

// Forget ends the tracking without waiting.
func (t *Tracked) Forget() {
	t.s.mu.Lock()
	delete(t.s.watches, t.id)
	t.s.mu.Unlock()
}

// settle re-asserts id's current state while its last record read is a
// loser, a few times at most (each loss means a newer change won).
func (s *Store) settle(ctx context.Context, id string, produce func(context.Context, *kgo.Record) error) error {
	for range 3 {
		r, ok := s.reassertion(id)
		if !ok {
			return nil
		}
		if err := produce(ctx, r); err != nil {
			return err
		}
		if err := s.follow.WaitPast(ctx, r.Topic, r.Partition, r.Offset); err != nil {
			return err
		}
	}
	return nil
}

// reassertion returns the record that settles id, if its last record
// lost: the current record unchanged, or a tombstone.
func (s *Store) reassertion(id string) (*kgo.Record, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if _, ok := s.unsettled[id]; !ok {
		return nil, false
	}
	r := &kgo.Record{Topic: s.topic, Key: []byte(id)}
	if e := s.byID[id]; e != nil && e.rec != nil {
		var err error
		if r, err = hkafka.Record(s.topic, id, e.rec); err != nil {
			return nil, false
		}
	}
	r.Headers = []kgo.RecordHeader{{Key: reassertHeader, Value: []byte("1")}}
	return r, true
}

// Repair keeps the last record of every endpoint a winner, so that
// compaction, which keeps only a key's last record, can never make a
// record that lost the current state: whenever the view finds an id
// whose last record lost, it writes the current state again (the
// current record unchanged, which the view applies as a re-assertion,
// or a tombstone) with produce, and waits to read it. Re-assertions by
// several processes at once are harmless: each equals the current record.
// It runs until ctx ends; produce errors are retried after retry.
func (s *Store) Repair(ctx context.Context, produce func(context.Context, ...*kgo.Record) error, retry time.Duration) error {
	select {
	case <-s.ready:
	case <-ctx.Done():
		return nil
	}
	for {
		s.mu.RLock()
		wake := s.unsettledCh
		ids := make([]string, 0, len(s.unsettled))
		for id := range s.unsettled {
			ids = append(ids, id)
		}
		s.mu.RUnlock()
		var recs []*kgo.Record
		for _, id := range ids {
			if r, ok := s.reassertion(id); ok {
				recs = append(recs, r)
			}
		}
		if len(recs) > 0 {
			err := produce(ctx, recs...)
			for _, r := range recs {
				if err != nil {
					break
				}
				err = s.follow.WaitPast(ctx, r.Topic, r.Partition, r.Offset)
			}
			if ctx.Err() != nil {
				return nil //nolint:nilerr // stopping is not a failure
			}
			if err != nil {
				t := time.NewTimer(retry)
				select {
				case <-ctx.Done():
					t.Stop()
					return nil
				case <-t.C:
				}
			}
			continue // look again: a repair can lose to a newer change
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return nil
		}
	}
}

// Unsettled returns how many endpoints' last record lost and awaits
// Repair.
func (s *Store) Unsettled() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.unsettled)
}

// Put applies rec to this process's view ahead of the log, provisionally:
// Get returns it while it is newer than what the log decided, and it is
// dropped as soon as the view reads a record of its version or later (or
// a tombstone), whatever the log decided. It never takes part in the
// log-order decision, so a Put that loses in the log does not make this
// view disagree with the others. Prefer Write; Put is for tests that
// seed a Store without Kafka and for writers inside a transaction.
func (s *Store) Put(rec *hooklinev1.EndpointRecord) {
	id := rec.GetEndpoint().GetId()
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.byID[id]; e != nil && (e.rec == nil || e.rec.GetVersion() >= rec.GetVersion()) {
		return // deleted, or the log is already there
	}
	s.remembered.forget()
	s.provisional[id] = rec
}

// Get returns the endpoint with id, or nil.
func (s *Store) Get(id string) *hooklinev1.EndpointRecord {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.getLocked(id)
}

func (s *Store) getLocked(id string) *hooklinev1.EndpointRecord {
	if p := s.provisional[id]; p != nil {
		return p
	}
	if e := s.byID[id]; e != nil {
		return e.rec
	}
	return nil
}

// List returns the tenant's endpoints ordered by id.
func (s *Store) List(tenant string) []*hooklinev1.EndpointRecord {
	s.mu.RLock()
	out := make([]*hooklinev1.EndpointRecord, 0, len(s.byTenant[tenant]))
	for id := range s.byTenant[tenant] {
		out = append(out, s.getLocked(id))
	}
	for id, p := range s.provisional {
		if p.GetEndpoint().GetTenantId() == tenant && s.byTenant[tenant][id] == nil {
			out = append(out, p)
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b *hooklinev1.EndpointRecord) int {
		return strings.Compare(a.GetEndpoint().GetId(), b.GetEndpoint().GetId())
	})
	return out
}

// IDs returns the ids of every live endpoint, of every tenant, sorted.
func (s *Store) IDs() []string {
	s.mu.RLock()
	out := make([]string, 0, len(s.byID))
	for _, t := range s.byTenant {
		for id := range t {
			out = append(out, id)
		}
	}
	s.mu.RUnlock()
	slices.Sort(out)
	return out
}

// Count returns how many endpoints the tenant has.
func (s *Store) Count(tenant string) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.byTenant[tenant])
}

// Size returns how many endpoint ids the view holds state for: live
// endpoints, remembered deletions and provisional records. For tests of
// pruning.
func (s *Store) Size() (ids, tenants, provisional int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.byID), len(s.byTenant), len(s.provisional)
}

// MaxActiveSecrets is how many signing secrets of one endpoint may sign
// at once: the current one and those rotated out still in their grace
// period. A rotation beyond it is refused.
const MaxActiveSecrets = 3
