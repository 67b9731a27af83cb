package kafka

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Follower reads topics from their start, read_committed, and hands every
// committed record to apply, in offset order per partition, from one
// goroutine. It tracks how far it has read so callers can wait for it to
// pass a point (Sync, WaitPast). It is how every materialised view in
// Hookline is fed: endpoints, idempotency claims, the delivery index. It
// is safe for concurrent use.
//
// Transaction markers are kept (KeepControlRecords) and only advance the
// position: without them a reader of a transactional topic never reaches
// the topic's end offset, which counts the markers.
type Follower struct {
	topics []string
	apply  func(*kgo.Record)

	mu       sync.Mutex
	pos      map[string]map[int32]int64 // topic → partition → next offset
	advanced chan struct{}              // closed and replaced when pos moves

	admReady chan struct{}
	adm      *kadm.Client
}

// NewFollower returns a Follower of topics that calls apply for each
// committed record. Run starts it.
func NewFollower(apply func(*kgo.Record), topics ...string) *Follower {
	return &Follower{
		topics:   topics,
		apply:    apply,
		pos:      map[string]map[int32]int64{},
		advanced: make(chan struct{}),
		admReady: make(chan struct{}),
	}
}

// Run consumes until ctx ends; a fetch error ends it with that error.
func (f *Follower) Run(ctx context.Context, cfg Config) error {
	opts, err := cfg.Opts()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(opts,
		kgo.ConsumeTopics(f.topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxBytes(int32(2*MaxRecordBytes)),
	)...)
	if err != nil {
		return fmt.Errorf("follow %v: %w", f.topics, err)
	}
	defer cl.Close()
	f.adm = kadm.NewClient(cl)
	close(f.admReady)
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil //nolint:nilerr // stopping is not a failure
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			ferr = fmt.Errorf("follow %s/%d: %w", t, p, err)
		})
		if ferr != nil {
			return ferr
		}
		f.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				f.apply(r)
			}
			t := f.pos[r.Topic]
			if t == nil {
				t = map[int32]int64{}
				f.pos[r.Topic] = t
			}
			t[r.Partition] = r.Offset + 1
		})
		close(f.advanced)
		f.advanced = make(chan struct{})
		f.mu.Unlock()
	}
}

// Sync waits until every record committed to topic before Sync was called
// has been applied: it lists the topic's last stable offsets now and
// waits for the reader to pass them.
func (f *Follower) Sync(ctx context.Context, topic string) error {
	select {
	case <-f.admReady:
	case <-ctx.Done():
		return ctx.Err()
	}
	ends, err := f.adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", topic, err)
	}
	for {
		caughtUp := true
		f.mu.Lock()
		ends.Each(func(o kadm.ListedOffset) {
			if o.Offset > 0 && f.pos[topic][o.Partition] < o.Offset {
				caughtUp = false
			}
		})
		wait := f.advanced
		f.mu.Unlock()
		if caughtUp {
			return nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return fmt.Errorf("sync %s: %w", topic, ctx.Err())
		}
	}
}

// WaitPast waits until the record at offset of topic/partition has been
// read (applied, or skipped as aborted or a marker).
func (f *Follower) WaitPast(ctx context.Context, topic string, partition int32, offset int64) error {
	for {
		f.mu.Lock()
		done := f.pos[topic][partition] > offset
		wait := f.advanced
		f.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Changed returns a channel closed the next time the reader advances.
func (f *Follower) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.advanced
}
