package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DefaultSyncTimeout bounds every Sync and WaitPast whose context has no
// earlier deadline.
const DefaultSyncTimeout = 30 * time.Second

// defaultProbeAfter is how long a wait lets a lagging partition stand
// still before it reads the partition itself to learn whether anything
// readable is left below the target.
const defaultProbeAfter = 200 * time.Millisecond

// ErrSyncTimeout is returned (wrapped) by Sync and WaitPast when the
// Follower's own bound (DefaultSyncTimeout) ends the wait before the
// caller's context does.
var ErrSyncTimeout = errors.New("follower did not catch up in time")

// Follower reads topics from their start, read_committed, and hands every
// committed record to apply, in offset order per partition, from one
// goroutine. It tracks how far it has read so callers can wait for it to
// pass a point (Sync, WaitPast). It is how every materialised view in
// Hookline is fed: endpoints, idempotency claims, the delivery index. It
// is safe for concurrent use.
//
// Transaction markers are kept (KeepControlRecords) and advance the
// position: without them a reader of a transactional topic never reaches
// the topic's end offset, which counts the markers. Some ends are never
// reached by reading, because nothing readable is left below them: a
// partition emptied by retention or DeleteRecords, aborted records whose
// abort marker lies past the last stable offset. A wait whose partition
// stands still therefore reads that partition itself (one Fetch request
// from the position, read_committed, as the consumer would) and moves the
// position over whatever holds nothing to apply.
//
// A consumer that leaves a record unread while the waits' probes read it
// (one seen after every broker of a cluster restarted) is made again
// from its positions (stuck.go).
//
// Every wait is bounded: by the caller's context and by
// DefaultSyncTimeout.
type Follower struct {
	topics []string
	apply  func(*kgo.Record)
	// batch, when set (NewBatchFollower), takes each poll's records
	// instead of apply; from holds where reading starts.
	batch BatchApply
	from  Offsets

	// syncTimeout, probeAfter and stuckAfter are DefaultSyncTimeout,
	// defaultProbeAfter and defaultStuckAfter; tests shorten them.
	syncTimeout time.Duration
	probeAfter  time.Duration
	stuckAfter  time.Duration

	mu       sync.Mutex
	pos      map[string]map[int32]int64 // topic → partition → next offset
	advanced chan struct{}              // closed and replaced when pos moves
	ids      map[string][16]byte        // topic IDs, for probe fetches
	parts    map[string]partitionList   // partitions, for lastStable
	probing  chan struct{}              // held by the one probe running
	// waiting is, per partition a probe found a record at the position
	// of, since when it has been found there (stuck.go); rebuild is set
	// when the consumer is to be made again; cut ends its poll in
	// progress (nil when none is), begun at polling; rebuilds counts the
	// consumers made again.
	waiting  map[string]map[int32]waitingAt
	rebuild  bool
	cut      context.CancelFunc
	polling  time.Time
	rebuilds int
	rounds   rounds // SyncAll's shared requests
	// probedBytes, when set (tests), sees the record bytes each probe
	// fetch returned, while the probe holds them.
	probedBytes func(bytes int)

	// Set by Run before admReady is closed: the consumer, and the client
	// that waits list offsets and probe with.
	admReady chan struct{}
	cl       *kgo.Client
	wcl      *kgo.Client
	adm      *kadm.Client
}

// NewFollower returns a Follower of topics that calls apply for each
// committed record. Run starts it.
func NewFollower(apply func(*kgo.Record), topics ...string) *Follower {
	return &Follower{
		topics:      topics,
		apply:       apply,
		syncTimeout: DefaultSyncTimeout,
		probeAfter:  defaultProbeAfter,
		stuckAfter:  defaultStuckAfter,
		pos:         map[string]map[int32]int64{},
		waiting:     map[string]map[int32]waitingAt{},
		ids:         map[string][16]byte{},
		parts:       map[string]partitionList{},
		advanced:    make(chan struct{}),
		admReady:    make(chan struct{}),
		probing:     make(chan struct{}, 1),
	}
}

// batchFetchMaxBytes bounds one fetch of a batch follower, and one
// partition's share of it.
const batchFetchMaxBytes = 1 << 20

// fetchLimits bounds what the consumer holds. A batch follower (the
// delivery index, which reads the whole history from offset 0 on a new
// replica) holds per broker at most two fetches, the one being applied
// and the next, each at most batchFetchMaxBytes as Kafka counts them
// (compressed; a record larger than that is still fetched whole).
// Decompressed they can be several times that: the view bounds its own
// write batches (history.Writer.Apply). Concurrency stays one fetch per
// broker (kgo's default): fewer would leave a broker with new records
// waiting behind another's long poll. Other followers fetch enough for
// the largest record twice.
func (f *Follower) fetchLimits() []kgo.Opt {
	if f.batch == nil {
		return []kgo.Opt{kgo.FetchMaxBytes(2 * MaxRecordBytes)}
	}
	return []kgo.Opt{
		kgo.FetchMaxBytes(batchFetchMaxBytes),
		kgo.FetchMaxPartitionBytes(batchFetchMaxBytes),
	}
}

// Offsets maps topic → partition → the next offset to read.
type Offsets map[string]map[int32]int64

// BatchApply takes the records of one poll (control records left out)
// and next, the position each partition the poll touched reaches once
// they are applied (control records included). A view that persists
// stores next with the records, atomically, to resume from it. An error
// ends Run with it; the position does not move.
type BatchApply func(recs []*kgo.Record, next Offsets) error

// NewBatchFollower returns a Follower of topics that hands each poll's
// records to apply and starts reading each partition at from (a
// partition missing from from, or whose offset retention deleted, is
// read from its start). Sync and WaitPast count from's offsets as read.
func NewBatchFollower(apply BatchApply, from Offsets, topics ...string) *Follower {
	f := NewFollower(nil, topics...)
	f.batch = apply
	f.from = from
	for t, ps := range from {
		for p, o := range ps {
			f.advanceLocked(t, p, o)
		}
	}
	return f
}

// Run consumes until ctx ends; a fetch error ends it with that error.
func (f *Follower) Run(ctx context.Context, cfg Config) error {
	opts, err := cfg.Opts()
	if err != nil {
		return err
	}
	// Waits ask Kafka through a client of their own: a broker answers a
	// connection's requests in order, and the consumer's connection is
	// held by long-polling fetches.
	wcl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("follow %v: %w", f.topics, err)
	}
	defer wcl.Close()
	f.wcl = wcl
	f.adm = kadm.NewClient(wcl)
	consume := kgo.ConsumeTopics(f.topics...)
	if f.from != nil {
		start, err := f.startOffsets(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil //nolint:nilerr // stopping is not a failure
			}
			return fmt.Errorf("follow %v: %w", f.topics, err)
		}
		consume = kgo.ConsumePartitions(start)
	}
	cl, err := kgo.NewClient(f.consumerOpts(opts, consume)...)
	if err != nil {
		return fmt.Errorf("follow %v: %w", f.topics, err)
	}
	f.mu.Lock()
	f.cl = cl
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		cl := f.cl
		f.mu.Unlock()
		cl.Close()
	}()
	close(f.admReady)
	if f.batch != nil {
		return f.runBatches(ctx, opts)
	}
	for {
		fs, err := f.next(ctx, opts)
		if fs == nil {
			return err
		}
		f.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				f.apply(r)
			}
			f.advanceLocked(r.Topic, r.Partition, r.Offset+1)
		})
		f.mu.Unlock()
	}
}

// consumerOpts are the consumer's options: opts, where it reads from
// (consume), read_committed with the transaction markers kept.
func (f *Follower) consumerOpts(opts []kgo.Opt, consume kgo.Opt) []kgo.Opt {
	return append(append(slices.Clip(opts),
		consume,
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	), f.fetchLimits()...)
}

// poll returns the next fetches, or nil and why Run ends: nil when ctx
// ended (stopping is not a failure), the first fetch error otherwise.
func poll(ctx context.Context, cl *kgo.Client) (kgo.Fetches, error) {
	fs := cl.PollFetches(ctx)
	if ctx.Err() != nil {
		return nil, nil //nolint:nilerr // stopping is not a failure
	}
	var ferr error
	fs.EachError(func(t string, p int32, err error) {
		ferr = fmt.Errorf("follow %s/%d: %w", t, p, err)
	})
	if ferr != nil {
		return nil, ferr
	}
	return fs, nil
}

// startOffsets returns where each partition of the topics is read from:
// its offset in f.from, else its start. Hookline never adds partitions
// (see lastStable), so the list is fixed for the run.
//
// A topic another process created a moment ago may not be known yet to
// the broker that answers (on a cluster of several, each learns of it
// from the controller in its own time): that is retried, backing off,
// for up to topicAppearWait, and only then an error.
func (f *Follower) startOffsets(ctx context.Context) (map[string]map[int32]kgo.Offset, error) {
	deadline := time.Now().Add(topicAppearWait)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		out, err := f.listStartOffsets(ctx)
		if err == nil || !errors.Is(err, kerr.UnknownTopicOrPartition) || !time.Now().Add(wait).Before(deadline) {
			return out, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// topicAppearWait is how long startOffsets waits for a topic to be known.
const topicAppearWait = 30 * time.Second

func (f *Follower) listStartOffsets(ctx context.Context) (map[string]map[int32]kgo.Offset, error) {
	ts, err := f.adm.ListTopics(ctx, f.topics...)
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	out := map[string]map[int32]kgo.Offset{}
	for _, t := range f.topics {
		d, ok := ts[t]
		switch {
		case !ok || d.Err == nil && len(d.Partitions) == 0:
			return nil, fmt.Errorf("partitions of %s: not found (%w)", t, kerr.UnknownTopicOrPartition)
		case d.Err != nil:
			return nil, fmt.Errorf("partitions of %s: not found (%w)", t, d.Err)
		}
		ps := map[int32]kgo.Offset{}
		for _, p := range d.Partitions.Numbers() {
			ps[p] = kgo.NewOffset().AtStart()
			if o, ok := f.from[t][p]; ok {
				ps[p] = kgo.NewOffset().At(o)
			}
		}
		out[t] = ps
	}
	return out, nil
}

// runBatches is Run's loop for a batch Follower: each poll's records go
// to f.batch in one call, and the position moves once it returned.
func (f *Follower) runBatches(ctx context.Context, opts []kgo.Opt) error {
	for {
		fs, err := f.next(ctx, opts)
		if fs == nil {
			return err
		}
		var recs []*kgo.Record
		next := Offsets{}
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				recs = append(recs, r)
			}
			ps := next[r.Topic]
			if ps == nil {
				ps = map[int32]int64{}
				next[r.Topic] = ps
			}
			ps[r.Partition] = r.Offset + 1
		})
		if len(next) == 0 {
			continue
		}
		if err := f.batch(recs, next); err != nil {
			return fmt.Errorf("follow %v: apply: %w", f.topics, err)
		}
		f.mu.Lock()
		for t, ps := range next {
			for p, o := range ps {
				f.advanceLocked(t, p, o)
			}
		}
		f.mu.Unlock()
	}
}

// advanceLocked moves the position of topic/partition to next if that is
// further, and wakes the waiters.
func (f *Follower) advanceLocked(topic string, partition int32, next int64) {
	t := f.pos[topic]
	if t == nil {
		t = map[int32]int64{}
		f.pos[topic] = t
	}
	if next <= t[partition] {
		return
	}
	t[partition] = next
	close(f.advanced)
	f.advanced = make(chan struct{})
}

// Sync waits until every record committed to topic before Sync was called
// has been applied: it lists the topic's last stable offsets now and
// waits for the reader to pass them, or to learn that nothing readable is
// left below them (see Follower). It returns within DefaultSyncTimeout
// even if ctx has no deadline; that failure wraps ErrSyncTimeout.
func (f *Follower) Sync(ctx context.Context, topic string) error {
	ctx, cancel := f.bound(ctx)
	defer cancel()
	if err := f.started(ctx); err != nil {
		return f.failed("sync "+topic, ctx, err)
	}
	targets, err := f.lastStable(ctx, topic)
	if err != nil {
		return f.failed("sync "+topic, ctx, err)
	}
	if err := f.waitFor(ctx, topic, targets); err != nil {
		return f.failed("sync "+topic, ctx, err)
	}
	return nil
}

// lastStable returns the last stable offset of each non-empty partition
// of topic: one ListOffsets round trip to the leaders, for the
// partitions listed by the last metadata look-up (at most
// partitionsMaxAge old). Sync is on every publish's path (the endpoints
// barrier), and kadm's ListCommittedOffsets asks for metadata first, a
// second round trip each time. Hookline never adds partitions to a topic
// (the endpoints and idempotency views order a key's records within its
// partition); a partition an operator adds anyway is seen within
// partitionsMaxAge. A failed fast path falls back to kadm.
func (f *Follower) lastStable(ctx context.Context, topic string) (map[int32]int64, error) {
	targets := map[int32]int64{}
	parts, err := f.partitions(ctx, topic)
	if err == nil {
		req := newEndsRequest()
		req.Topics = append(req.Topics, endsOf(topic, parts))
		var seen int
		seen, err = collectOffsets(f.wcl.RequestSharded(ctx, req), topic, targets)
		if err == nil && seen == len(parts) {
			return targets, nil
		}
		f.mu.Lock()
		delete(f.parts, topic) // look the partitions up again next time
		f.mu.Unlock()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	ends, err := f.adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, err
	}
	clear(targets)
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			targets[o.Partition] = o.Offset
		}
	})
	return targets, nil
}

// newEndsRequest is a ListOffsets request for last stable offsets.
func newEndsRequest() *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	req.IsolationLevel = 1 // read_committed: the last stable offset
	return req
}

// endsOf asks for the end of each partition of topic in parts.
func endsOf(topic string, parts []int32) kmsg.ListOffsetsRequestTopic {
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for _, p := range parts {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = p
		rp.CurrentLeaderEpoch = -1
		rp.Timestamp = -1 // the end
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

// collectOffsets puts each partition's offset above 0 from shards into
// targets and counts the partitions answered; any error ends it.
func collectOffsets(shards []kgo.ResponseShard, topic string, targets map[int32]int64) (int, error) {
	seen := 0
	for _, sh := range shards {
		if sh.Err != nil {
			return seen, sh.Err
		}
		for _, t := range sh.Resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return seen, err
				}
				if t.Topic != topic {
					continue
				}
				seen++
				if p.Offset > 0 {
					targets[p.Partition] = p.Offset
				}
			}
		}
	}
	return seen, nil
}

// partitionsMaxAge is how old the partition list lastStable uses may be.
const partitionsMaxAge = time.Minute

type partitionList struct {
	ids    []int32
	listed time.Time
}

// partitions returns topic's partitions as listed at most
// partitionsMaxAge ago, and remembers the topic's id for probes.
func (f *Follower) partitions(ctx context.Context, topic string) ([]int32, error) {
	f.mu.Lock()
	pl, ok := f.parts[topic]
	f.mu.Unlock()
	if ok && time.Since(pl.listed) < partitionsMaxAge {
		return pl.ids, nil
	}
	ts, err := f.adm.ListTopics(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("partitions of %s: %w", topic, err)
	}
	d, ok := ts[topic]
	if !ok || d.Err != nil || len(d.Partitions) == 0 {
		if d.Err != nil {
			return nil, fmt.Errorf("partitions of %s: %w", topic, d.Err)
		}
		return nil, fmt.Errorf("partitions of %s: not found", topic)
	}
	ids := d.Partitions.Numbers()
	f.mu.Lock()
	f.parts[topic] = partitionList{ids: ids, listed: time.Now()}
	f.ids[topic] = d.ID
	f.mu.Unlock()
	return ids, nil
}

// WaitPast waits until the record at offset of topic/partition has been
// read (applied, or skipped as aborted, a marker, or no longer in the
// log). It returns within DefaultSyncTimeout even if ctx has no deadline;
// that failure wraps ErrSyncTimeout.
func (f *Follower) WaitPast(ctx context.Context, topic string, partition int32, offset int64) error {
	ctx, cancel := f.bound(ctx)
	defer cancel()
	if err := f.started(ctx); err != nil {
		return f.failed(fmt.Sprintf("wait past %s/%d@%d", topic, partition, offset), ctx, err)
	}
	if err := f.waitFor(ctx, topic, map[int32]int64{partition: offset + 1}); err != nil {
		return f.failed(fmt.Sprintf("wait past %s/%d@%d", topic, partition, offset), ctx, err)
	}
	return nil
}

// Changed returns a channel closed the next time the reader advances.
func (f *Follower) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.advanced
}

// bound gives ctx the Follower's own deadline, marked by ErrSyncTimeout.
func (f *Follower) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, f.syncTimeout, ErrSyncTimeout)
}

// failed wraps err for what; when the Follower's own bound ended the wait
// it says so (ErrSyncTimeout) rather than blaming the caller's context.
func (f *Follower) failed(what string, ctx context.Context, err error) error {
	if cause := context.Cause(ctx); errors.Is(cause, ErrSyncTimeout) {
		return fmt.Errorf("%s: %w after %s (%w)", what, ErrSyncTimeout, f.syncTimeout, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func (f *Follower) started(ctx context.Context) error {
	select {
	case <-f.admReady:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitFor waits until the position of every partition of topic in
// targets is at or past its target. A partition that stands still for
// probeAfter while behind is probed: read from its position by a Fetch
// of our own, and the position moved over every offset below the first
// record the consumer will hand over (records deleted, aborted, or
// compacted away leave nothing to apply).
func (f *Follower) waitFor(ctx context.Context, topic string, targets map[int32]int64) error {
	ticker := time.NewTicker(f.probeAfter)
	defer ticker.Stop()
	seen := map[int32]int64{} // position at the last tick
	var probeErr error        // the last probe's failure, for the report
	for {
		f.mu.Lock()
		behind := map[int32]int64{}
		for p, target := range targets {
			if pos := f.pos[topic][p]; pos < target {
				behind[p] = pos
			}
		}
		wait := f.advanced
		f.mu.Unlock()
		if len(behind) == 0 {
			return nil
		}
		select {
		case <-wait:
		case <-ticker.C:
			for p, pos := range behind {
				if last, ok := seen[p]; ok && last == pos {
					// A failed probe (leader moving, broker away) is
					// tried again at the next tick.
					waiting, err := f.probe(ctx, topic, p, pos)
					if err != nil {
						probeErr = err
					}
					f.probed(topic, p, pos, waiting) // stuck.go
				}
				seen[p] = pos
			}
		case <-ctx.Done():
			if probeErr != nil {
				return fmt.Errorf("%w (last probe: %w)", ctx.Err(), probeErr)
			}
			return ctx.Err()
		}
	}
}

// probeBatches bounds the record batches one probe reads.
const probeBatches = 16

// probe fetches topic/partition from offset from, read_committed, as the
// consumer does, and advances the position to the first record the
// consumer will return from there (or past everything the fetches
// covered if they hold no such record). Below that offset there is
// nothing to apply: records deleted by retention or DeleteRecords,
// aborted records, batches emptied by compaction.
//
// Each fetch asks for one record batch (a broker returns the first batch
// whole whatever the limit), at most probeBatches of them, and one probe
// runs at a time per Follower: a rebuild from offset 0 leaves many
// partitions standing still behind, and every waiting call probes them,
// so what probes hold must not grow with the backlog or the callers.
func (f *Follower) probe(ctx context.Context, topic string, partition int32, from int64) (waiting bool, err error) {
	select {
	case f.probing <- struct{}{}:
		defer func() { <-f.probing }()
	case <-ctx.Done():
		return false, ctx.Err()
	}
	f.mu.Lock()
	moved := f.pos[topic][partition] > from
	f.mu.Unlock()
	if moved {
		return false, nil // read, or probed by another waiter, meanwhile
	}
	at := from
	for range probeBatches + 2 { // two more: out of range, then from the log start
		rp, err := f.fetchOnce(ctx, topic, partition, from)
		if err != nil {
			return false, err
		}
		if f.probedBytes != nil {
			f.probedBytes(len(rp.RecordBatches))
		}
		fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
			KeepControlRecords: true,
			Offset:             from,
			IsolationLevel:     kgo.ReadCommitted(),
			Topic:              topic,
			Partition:          partition,
		}, rp, kgo.DefaultDecompressor(), nil)
		switch {
		case errors.Is(fp.Err, kerr.OffsetOutOfRange):
			starts, err := f.adm.ListStartOffsets(ctx, topic)
			if err != nil {
				return false, fmt.Errorf("list start offsets: %w", err)
			}
			start, ok := starts.Lookup(topic, partition)
			if !ok || start.Err != nil {
				return false, fmt.Errorf("list start offset of %s/%d: %w", topic, partition, start.Err)
			}
			if start.Offset <= from {
				return false, nil // past the end (truncated): the next Sync lists new ends
			}
			from = start.Offset // deleted below here: nothing to apply
			continue
		case fp.Err != nil:
			return false, nil //nolint:nilerr // the consumer meets the same error and reports it
		}
		if len(fp.Records) > 0 {
			next = fp.Records[0].Offset // the consumer hands this one over
		}
		f.mu.Lock()
		f.advanceLocked(topic, partition, next)
		f.mu.Unlock()
		if len(fp.Records) > 0 || next <= from {
			// A record to hand over (at the position the wait saw:
			// the consumer has not handed it over), or the end.
			return len(fp.Records) > 0 && fp.Records[0].Offset == at, nil
		}
		from = next // a batch with nothing to apply: the next one
	}
	return false, nil
}

// fetchOnce sends one Fetch for topic/partition at offset to its leader,
// returning without waiting for new data: its first record batch only.
func (f *Follower) fetchOnce(ctx context.Context, topic string, partition int32, offset int64) (*kmsg.FetchResponseTopicPartition, error) {
	id, err := f.topicID(ctx, topic)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	cl := f.cl // made again when stuck (stuck.go)
	f.mu.Unlock()
	leader, _, err := cl.PartitionLeader(topic, partition)
	if err != nil {
		return nil, fmt.Errorf("leader of %s/%d: %w", topic, partition, err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = 0
	req.MinBytes = 1
	req.MaxBytes = 1       // the first batch, whole
	req.IsolationLevel = 1 // read_committed
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rt.TopicID = id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = partition
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = 1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, f.wcl.Broker(int(leader)))
	if err != nil {
		return nil, fmt.Errorf("probe fetch %s/%d: %w", topic, partition, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("probe fetch %s/%d: %w", topic, partition, err)
	}
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			if p := &resp.Topics[i].Partitions[j]; p.Partition == partition {
				return p, nil
			}
		}
	}
	return nil, fmt.Errorf("probe fetch %s/%d: partition missing from the response", topic, partition)
}

func (f *Follower) topicID(ctx context.Context, topic string) ([16]byte, error) {
	f.mu.Lock()
	id, ok := f.ids[topic]
	f.mu.Unlock()
	if ok {
		return id, nil
	}
	ts, err := f.adm.ListTopics(ctx, topic)
	if err != nil {
		return id, fmt.Errorf("topic id of %s: %w", topic, err)
	}
	d, ok := ts[topic]
	if !ok || d.Err != nil {
		return id, fmt.Errorf("topic id of %s: %w", topic, d.Err)
	}
	f.mu.Lock()
	f.ids[topic] = d.ID
	f.mu.Unlock()
	return d.ID, nil
}
