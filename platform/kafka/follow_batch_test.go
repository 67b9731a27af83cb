package kafka

import (
	"context"
	"crypto/rand"
	"sync"
	"testing"

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
