package kafka

import (
	"crypto/rand"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// batchBytes is how large the record batches backlog writes may be.
const batchBytes = 256 << 10

// backlog writes n records of 48 KiB, incompressible (Kafka's limits
// count compressed bytes), to a new topic of three partitions, in
// batches of at most batchBytes.
func backlog(t *testing.T, cfg Config, n int) (string, []*kgo.Record) {
	t.Helper()
	cl := testClient(t, cfg, kgo.ProducerBatchMaxBytes(batchBytes), kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	adm := kadm.NewClient(cl)
	topic := newTopic(t, adm, nil)
	if _, err := adm.CreatePartitions(t.Context(), 2, topic); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for range n {
		value := make([]byte, 48<<10)
		_, _ = rand.Read(value)
		recs = append(recs, &kgo.Record{Topic: topic, Value: value})
	}
	if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return topic, recs
}

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
	topic, recs := backlog(t, cfg, 256) // 12 MiB

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
	runFollower(t, cfg, f)
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
	topic, _ := backlog(t, cfg, 128) // 6 MiB

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
	f.probedBytes = func(n int) {
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
	runFollower(t, cfg, f)

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

// TestSyncAllSharesOneListOffsetsAmongTheCallsThatArriveMeanwhile: every
// history read waits for the index to reach the topics' ends; 20 reads
// arriving while a ListOffsets is in flight share the next one (sent
// after they arrived) instead of sending 20, and each sees what was
// written before it called.
func TestSyncAllSharesOneListOffsetsAmongTheCallsThatArriveMeanwhile(t *testing.T) {
	cfg, c := testBroker(t)
	if c == nil {
		t.Skip("counts requests inside kfake")
	}
	cl := testClient(t, cfg)
	adm := kadm.NewClient(cl)
	a, b := newTopic(t, adm, nil), newTopic(t, adm, nil)
	var mu sync.Mutex
	applied := 0
	f := NewBatchFollower(func(recs []*kgo.Record, _ Offsets) error {
		mu.Lock()
		applied += len(recs)
		mu.Unlock()
		return nil
	}, nil, a, b)
	runFollower(t, cfg, f)
	if err := f.SyncAll(t.Context()); err != nil { // partitions and ids looked up
		t.Fatal(err)
	}

	var lists sync.Mutex
	listed := 0
	inFlight, release := make(chan struct{}), make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	defer releaseOnce() // before the follower stops: the broker is held until then
	c.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if lo := req.(*kmsg.ListOffsetsRequest); len(lo.Topics) != 2 || lo.Topics[0].Partitions[0].Timestamp != -1 {
			return nil, nil, false // the consumer's own look-ups (of the start)
		}
		lists.Lock()
		listed++
		first := listed == 1
		lists.Unlock()
		if first {
			close(inFlight)
			<-release // the broker answers nothing meanwhile
		}
		return nil, nil, false
	})
	produce(t, cl, a, 3, time.Now())
	produce(t, cl, b, 2, time.Now())
	firstDone := make(chan error, 1)
	go func() { firstDone <- f.SyncAll(t.Context()) }()
	<-inFlight
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Go(func() { errs <- f.SyncAll(t.Context()) })
	}
	// Until all 20 wait for the next request, or a while: a goroutine
	// not yet scheduled then makes one more request, not a failure.
	for waiting, deadline := 0, time.Now().Add(2*time.Second); waiting < 20 && time.Now().Before(deadline); {
		f.rounds.mu.Lock()
		if f.rounds.next != nil {
			waiting = f.rounds.next.waiters
		}
		f.rounds.mu.Unlock()
		<-time.After(time.Millisecond)
	}
	releaseOnce()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := applied
	mu.Unlock()
	lists.Lock()
	defer lists.Unlock()
	if got != 5 {
		t.Fatalf("applied %d records when the calls returned, want 5", got)
	}
	if listed > 3 {
		t.Fatalf("%d ListOffsets requests for 21 calls, want 2 (the one in flight, one shared; 3 if a call came late)", listed)
	}
}
