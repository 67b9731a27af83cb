package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A consumer can stop handing over records it could read: the chaos
// suite's cluster-down-30s row saw a dispatcher's lanes follower, a
// franz-go client that lived through every broker's restart, leave
// records unread for minutes while its own probes read them (and the
// same topic read fine in the other dispatcher), so every wait on it
// failed and the work behind it stood still (docs/reliability.md,
// "Every row on three brokers after the restart changes"). Other
// clients' users report the same class after broker turbulence.
//
// A wait already probes a partition that stands still (waitFor). When
// the probe finds a record to hand over at the very position the
// consumer stands at, the consumer could have returned it; one that has
// not for defaultStuckAfter is stuck, and the Follower makes its
// consumer again, reading each partition from its position (nothing
// applied is applied twice: a position is the next offset to read). It
// is counted (Rebuilds) and logged. A consumer merely slow (a long
// apply, a fetch in flight) hands the record over long before.

// defaultStuckAfter is how long a record may wait at a partition's
// position, readable by a probe, before the consumer is made again.
const defaultStuckAfter = 5 * time.Second

// waitingAt is a record a probe found at a partition's position, and
// since when.
type waitingAt struct {
	pos   int64
	since time.Time
}

// probed takes a probe's finding for topic/partition at pos: waiting
// says it read a record there that the consumer has not handed over.
func (f *Follower) probed(topic string, partition int32, pos int64, waiting bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ps := f.waiting[topic]
	if !waiting {
		delete(ps, partition)
		return
	}
	if ps == nil {
		ps = map[int32]waitingAt{}
		f.waiting[topic] = ps
	}
	w, ok := ps[partition]
	if !ok || w.pos != pos {
		ps[partition] = waitingAt{pos: pos, since: time.Now()}
		return
	}
	// Stuck: a poll has waited on Kafka, not on an apply, all along.
	if f.cut == nil || time.Since(w.since) < f.stuckAfter || time.Since(f.polling) < f.stuckAfter || f.rebuild {
		return
	}
	slog.Warn("kafka: a follower's consumer leaves a record it can read unread; making it again from its positions",
		"topic", topic, "partition", partition, "offset", pos, "for", time.Since(w.since).Round(time.Millisecond))
	f.rebuild = true
	clear(f.waiting)
	if f.cut != nil {
		f.cut()
	}
}

// Rebuilds returns how many times the consumer was made again.
func (f *Follower) Rebuilds() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rebuilds
}

// next returns the consumer's next fetches (see poll), making the
// consumer again first when a probe found it stuck.
func (f *Follower) next(ctx context.Context, opts []kgo.Opt) (kgo.Fetches, error) {
	for {
		f.mu.Lock()
		if f.rebuild {
			f.mu.Unlock()
			if err := f.remake(ctx, opts); err != nil {
				return nil, err
			}
			continue
		}
		cl := f.cl
		pctx, cut := context.WithCancel(ctx)
		f.cut, f.polling = cut, time.Now()
		f.mu.Unlock()
		fs, err := poll(pctx, cl)
		f.mu.Lock()
		f.cut = nil
		f.mu.Unlock()
		cut()
		if fs != nil || err != nil || ctx.Err() != nil {
			return fs, err
		}
		// Cut short by a rebuild: the loop makes it.
	}
}

// remake replaces the consumer with one that reads each partition of the
// topics from its position (from its start if nothing was read).
func (f *Follower) remake(ctx context.Context, opts []kgo.Opt) error {
	from := map[string]map[int32]kgo.Offset{}
	for _, t := range f.topics {
		parts, err := f.partitions(ctx, t)
		if err != nil {
			if ctx.Err() != nil {
				return nil //nolint:nilerr // stopping is not a failure
			}
			return fmt.Errorf("follow %v: make the consumer again: %w", f.topics, err)
		}
		from[t] = map[int32]kgo.Offset{}
		f.mu.Lock()
		for _, p := range parts {
			if o, ok := f.pos[t][p]; ok {
				from[t][p] = kgo.NewOffset().At(o)
			} else {
				from[t][p] = kgo.NewOffset().AtStart()
			}
		}
		f.mu.Unlock()
	}
	cl, err := kgo.NewClient(f.consumerOpts(opts, kgo.ConsumePartitions(from))...)
	if err != nil {
		return fmt.Errorf("follow %v: make the consumer again: %w", f.topics, err)
	}
	f.mu.Lock()
	old := f.cl
	f.cl, f.rebuild = cl, false
	f.rebuilds++
	f.mu.Unlock()
	old.Close()
	return nil
}
