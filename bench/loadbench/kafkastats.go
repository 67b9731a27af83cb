package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kafkaStats reads, from outside, how much Hookline has written to its
// topics. Safe for concurrent use.
type kafkaStats struct {
	cl     *kgo.Client
	adm    *kadm.Client
	prefix string
}

func newKafkaStats(brokers []string, prefix string) (*kafkaStats, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	return &kafkaStats{cl: cl, adm: kadm.NewClient(cl), prefix: prefix}, nil
}

func (k *kafkaStats) close() { k.cl.Close() }

// written is what Hookline's topics hold at one moment: the sum of end
// offsets (records, transaction markers included) and of partition log
// sizes in bytes.
type written struct {
	records, bytes int64
	byTopic        map[string]int64 // records per topic, prefix dropped
}

func (w written) minus(o written) written {
	d := written{records: w.records - o.records, bytes: w.bytes - o.bytes, byTopic: map[string]int64{}}
	for t, n := range w.byTopic {
		if n -= o.byTopic[t]; n != 0 {
			d.byTopic[t] = n
		}
	}
	return d
}

// perDelivery formats records per delivery for the topics that took the
// most, e.g. "results 1.0 · deliveries 1.0 · delay.1s 0.4".
func (w written) perDelivery(deliveries int64, top int) string {
	if deliveries == 0 {
		return "n/a"
	}
	topics := slices.Collect(maps.Keys(w.byTopic))
	slices.SortFunc(topics, func(a, b string) int { return cmp.Compare(w.byTopic[b], w.byTopic[a]) })
	var parts []string
	for _, t := range topics[:min(top, len(topics))] {
		parts = append(parts, fmt.Sprintf("%s %.1f", t, float64(w.byTopic[t])/float64(deliveries)))
	}
	return strings.Join(parts, " · ")
}

// topics lists Hookline's topics (those with the prefix).
func (k *kafkaStats) topics(ctx context.Context) ([]string, error) {
	td, err := k.adm.ListTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	var out []string
	for _, t := range td.Names() {
		if strings.HasPrefix(t, k.prefix) {
			out = append(out, t)
		}
	}
	return out, nil
}

// snapshot sums end offsets and log sizes over every prefixed topic.
func (k *kafkaStats) snapshot(ctx context.Context) (written, error) {
	ts, err := k.topics(ctx)
	if err != nil {
		return written{}, err
	}
	w := written{byTopic: map[string]int64{}}
	ends, err := k.adm.ListEndOffsets(ctx, ts...)
	if err != nil {
		return w, fmt.Errorf("end offsets: %w", err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			w.records += o.Offset
			w.byTopic[strings.TrimPrefix(o.Topic, k.prefix)] += o.Offset
		}
	})
	dirs, err := k.adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		return w, fmt.Errorf("log dirs: %w", err)
	}
	dirs.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if strings.HasPrefix(p.Topic, k.prefix) {
				w.bytes += p.Size
			}
		})
	})
	return w, nil
}

// partitions returns how many partitions topic has.
func (k *kafkaStats) partitions(ctx context.Context, topic string) (int, error) {
	td, err := k.adm.ListTopics(ctx, topic)
	if err != nil {
		return 0, err
	}
	t, ok := td[topic]
	if !ok || t.Err != nil {
		return 0, fmt.Errorf("topic %s not found", topic)
	}
	return len(t.Partitions), nil
}

// partitionOf is the partition a record keyed by key goes to under the
// Kafka default partitioner (murmur2 of the key), which Hookline's
// producers use for the deliveries topic keyed by endpoint id.
func partitionOf(key string, n int) int {
	p := kgo.StickyKeyPartitioner(nil).ForTopic("")
	return p.Partition(&kgo.Record{Key: []byte(key)}, n)
}

// snapshotAt takes a snapshot at the moment at, in the background; the
// function it returns waits for that snapshot.
func (k *kafkaStats) snapshotAt(ctx context.Context, at time.Time) func() (written, error) {
	type result struct {
		w   written
		err error
	}
	ch := make(chan result, 1)
	go func() {
		t := time.NewTimer(time.Until(at))
		defer t.Stop()
		select {
		case <-t.C:
			w, err := k.snapshot(ctx)
			ch <- result{w, err}
		case <-ctx.Done():
			ch <- result{err: ctx.Err()}
		}
	}()
	return func() (written, error) {
		r := <-ch
		return r.w, r.err
	}
}

// busiestPartition returns the partition of topic whose end offset grew
// the most between two readings of partitionEnds.
func busiestPartition(before, after map[int32]int64) int32 {
	best, grew := int32(-1), int64(-1)
	for p, end := range after {
		if g := end - before[p]; g > grew {
			best, grew = p, g
		}
	}
	return best
}

// partitionEnds returns the end offset of each partition of topic.
func (k *kafkaStats) partitionEnds(ctx context.Context, topic string) (map[int32]int64, error) {
	ends, err := k.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	out := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			out[o.Partition] = o.Offset
		}
	})
	return out, nil
}
