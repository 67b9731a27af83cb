package kafka

import (
	"context"
	"crypto/rand"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestBatchFollowerPollsAreBoundedWhateverTheBacklog: a new replica of the
// delivery index reads the whole history from offset 0; what one poll
// hands to the view (and what the consumer holds) must stay near
// batchFetchMaxBytes however much is waiting, or the rebuild's memory
// grows with the backlog (1 MiB a fetch). 12 MiB of 48 KiB records waiting in three
// partitions, produced in batches of at most 256 KiB: no poll holds more
// than one fetch's worth plus one batch (a broker may return a fetch's
// first batch whole even when it is larger than the limit).
func TestBatchFollowerPollsAreBoundedWhateverTheBacklog(t *testing.T) {
	cfg, _ := testBroker(t)
	const batchBytes = 256 << 10
	cl := testClient(t, cfg, kgo.ProducerBatchMaxBytes(batchBytes), kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	adm := kadm.NewClient(cl)
	topic := newTopic(t, adm, nil)
	if _, err := adm.CreatePartitions(t.Context(), 2, topic); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for range 256 { // 12 MiB, incompressible: Kafka's limits count compressed bytes
		value := make([]byte, 48<<10)
		_, _ = rand.Read(value)
		recs = append(recs, &kgo.Record{Topic: topic, Value: value})
	}
	if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	largest, polls, total := 0, 0, 0
	f := NewBatchFollower(func(recs []*kgo.Record, _ Offsets) error {
		n := 0
		for _, r := range recs {
			n += len(r.Value)
		}
		mu.Lock()
		largest, polls, total = max(largest, n), polls+1, total+len(recs)
		mu.Unlock()
		return nil
	}, nil, topic)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx, cfg) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("follower: %v", err)
		}
	}()
	if err := f.Sync(t.Context(), topic); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if total != len(recs) {
		t.Fatalf("applied %d records, want %d", total, len(recs))
	}
	if limit := 1<<20 + batchBytes; largest > limit {
		t.Fatalf("a poll held %d bytes of values (%d polls), the bound is %d", largest, polls, limit)
	}
	t.Logf("%d polls, the largest %d KiB", polls, largest>>10)
}

// TestProbesReadOneBatchAtATimeWhateverTheCallers: while a rebuild is
// behind, every partition stands still for a while and every waiting
// call probes it. Probes used to fetch up to 16 MiB each, decompress it
// all, and run for every caller at once; now one probe runs at a time
// and reads one record batch per fetch.
func TestProbesReadOneBatchAtATimeWhateverTheCallers(t *testing.T) {
	cfg, _ := testBroker(t)
	const batchBytes = 256 << 10
	cl := testClient(t, cfg, kgo.ProducerBatchMaxBytes(batchBytes), kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	adm := kadm.NewClient(cl)
	topic := newTopic(t, adm, nil)
	if _, err := adm.CreatePartitions(t.Context(), 2, topic); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for range 128 { // 6 MiB, incompressible
		value := make([]byte, 48<<10)
		_, _ = rand.Read(value)
		recs = append(recs, &kgo.Record{Topic: topic, Value: value})
	}
	if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	gate := make(chan struct{}) // the first poll's apply waits for it
	var once sync.Once
	f := NewBatchFollower(func([]*kgo.Record, Offsets) error {
		once.Do(func() { <-gate })
		return nil
	}, nil, topic)
	f.probeAfter = 5 * time.Millisecond
	var mu sync.Mutex
	running, most, probes, largest := 0, 0, 0, 0
	enough := make(chan struct{})
	f.probed = func(n int) {
		mu.Lock()
		running++
		most, probes, largest = max(most, running), probes+1, max(largest, n)
		if probes == 40 {
			close(enough)
		}
		mu.Unlock()
		time.Sleep(time.Millisecond) // hold the batch a while, as decoding does
		mu.Lock()
		running--
		mu.Unlock()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx, cfg) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("follower: %v", err)
		}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for range 10 {
		wg.Go(func() { errs <- f.Sync(t.Context(), topic) })
	}
	select {
	case <-enough:
	case <-time.After(within):
		t.Fatal("the waiting calls never probed")
	}
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if most != 1 {
		t.Fatalf("%d probes ran at once", most)
	}
	if largest > batchBytes+4<<10 {
		t.Fatalf("a probe fetched %d bytes, more than one batch of %d", largest, batchBytes)
	}
}
