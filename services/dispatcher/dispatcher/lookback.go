package dispatcher

import (
	"context"
	"fmt"
	"sync"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The memory of placed deliveries (dedupe.go) is the dispatcher's own: a
// dispatcher that takes a partition over (a rebalance, a restart, a
// rolling upgrade) has not placed the originals of copies still to come.
// So when partitions are assigned, it reads each one's recent past, the
// records just before the group's committed offset, and remembers the
// ones that can have copies, before the partition is fetched from the
// committed offset on: a copy written after the handover of an original
// taken before it is then skipped as if this dispatcher had placed the
// original.
//
// Only ingest writes copies, and only of first attempts (Kind FIRST,
// attempt 1, no due time, no worker fault): those are the records
// remembered. Such a record is due when it is written, so its earlier
// owner placed it in its lane, ended it (endpoint deleted, another
// tenant's) or parked it (endpoint paused; it comes back UNPARKED): no
// legitimate record repeats its key. A record not yet due when its owner
// read it would have gone to the retries topic and come back unchanged
// — never remembered here, so never mistaken for a copy.
//
// The read is bounded: records written within --copy-lookback before
// the assignment, at most recentDeliveries in all (the memory's size,
// shared among the assigned partitions), for at most lookbackTimeout.
// A read that fails or runs out of time is logged and leaves the
// memory with what it read: copies are then attempted again, as
// before (receivers deduplicate on webhook-id).

// lookbackTimeout bounds the read of the assigned partitions' past.
const lookbackTimeout = 10 * time.Second

// seeds hands the keys read on an assignment (the group's goroutine)
// to the loop, which remembers them before it places the next polled
// records. An assigned partition is fetched only after its callback
// returned, so its records are placed after its seeds are taken.
type seeds struct {
	mu      sync.Mutex
	pending []seed
}

type seed struct {
	key string
	at  recordAt
}

func (ss *seeds) add(s []seed) {
	ss.mu.Lock()
	ss.pending = append(ss.pending, s...)
	ss.mu.Unlock()
}

// takeInto remembers the pending seeds in r.
func (ss *seeds) takeInto(r *recent) {
	ss.mu.Lock()
	pending := ss.pending
	ss.pending = nil
	ss.mu.Unlock()
	for _, s := range pending {
		r.copied(s.key, s.at)
	}
}

// copyable returns the copy key of r if ingest may have written a copy
// of it (see above), or "".
func copyable(r *kgo.Record) string {
	if r.Attrs.IsControl() || header(r, headerFaults) != "" || header(r, headerPutBack) != "" {
		return ""
	}
	d, err := decodeDelivery(r)
	if err != nil || d.GetKind() != hooklinev1.DeliveryKind_DELIVERY_KIND_FIRST || d.GetAttempt() != 1 || d.GetDueAt() != nil {
		return ""
	}
	return recordCopyKey(r, d)
}

// lookback reads the recent past of the deliveries partitions in
// assigned (see above), below their committed offsets, and returns the
// keys to remember.
func (s *Service) lookback(ctx context.Context, cl *kgo.Client, assigned map[string][]int32, committed kadm.OffsetResponses) ([]seed, error) {
	topic := s.topics.Deliveries
	parts := assigned[topic]
	if len(parts) == 0 || s.cfg.CopyLookback <= 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, lookbackTimeout)
	defer cancel()
	after, err := kadm.NewClient(cl).ListOffsetsAfterMilli(ctx, s.now().Add(-s.cfg.CopyLookback).UnixMilli(), topic)
	if err != nil {
		return nil, fmt.Errorf("offsets %v ago: %w", s.cfg.CopyLookback, err)
	}
	perPart := int64(recentDeliveries / len(parts))
	from := map[int32]kgo.Offset{}
	until := map[int32]int64{} // the committed offset: read below it
	for _, p := range parts {
		c, ok := committed.Lookup(topic, p)
		if !ok || c.Err != nil || c.At <= 0 {
			continue // nothing committed: the partition is read from its start anyway
		}
		start := max(c.At-perPart, 0)
		if o, ok := after.Lookup(topic, p); ok && o.Err == nil && o.Offset > start {
			start = o.Offset
		}
		if start < c.At {
			from[p], until[p] = kgo.NewOffset().At(start), c.At
		}
	}
	if len(from) == 0 {
		return nil, nil
	}
	opts, err := s.cfg.Kafka.Opts()
	if err != nil {
		return nil, err
	}
	rd, err := kgo.NewClient(append(opts,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Transaction markers too: the record just below the committed
		// offset may be one, and seeing it ends the partition's read.
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	var out []seed
	for len(until) > 0 {
		fs := rd.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("%d partitions not read to their committed offset: %w", len(until), err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := until[r.Partition]
			if !ok {
				return
			}
			if k := copyable(r); k != "" && r.Offset < end {
				out = append(out, seed{k, recordAt{r.Partition, r.Offset}})
			}
			if r.Offset >= end-1 {
				delete(until, r.Partition)
			}
		})
	}
	return out, nil
}

// seedCopies is the assignment callback's part of copy detection: it
// reads the assigned partitions' recent past, below the committed
// offsets the callback read, and hands what can have copies to the loop.
func (s *Service) seedCopies(ctx context.Context, cl *kgo.Client, e *engine, assigned map[string][]int32, committed kadm.OffsetResponses) {
	began := time.Now()
	got, err := s.lookback(ctx, cl, assigned, committed)
	if err != nil {
		s.log.Warn("assigned partitions' recent past not read whole; copies of deliveries taken before are attempted again", "err", err, "remembered", len(got))
	} else if len(got) > 0 {
		s.log.Info("remembered the deliveries taken before the assigned partitions' committed offsets, to skip their copies", "remembered", len(got), "took", time.Since(began))
	}
	e.seeds.add(got)
}
