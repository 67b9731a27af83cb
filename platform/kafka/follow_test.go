package kafka

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// testBroker returns the broker HOOKLINE_TEST_KAFKA names ("kfake" or
// unset: an in-process kfake cluster, returned too; otherwise host:port
// of a real broker, and a nil cluster).
func testBroker(t *testing.T) (Config, *kfake.Cluster) {
	t.Helper()
	addr := os.Getenv("HOOKLINE_TEST_KAFKA")
	if addr == "" || addr == "kfake" {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return Config{Brokers: c.ListenAddrs(), ClientID: "follow-test"}, c
	}
	return Config{Brokers: []string{addr}, ClientID: "follow-test"}, nil
}

func testClient(t *testing.T, cfg Config, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base, err := cfg.Opts()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func newTopic(t *testing.T, adm *kadm.Client, configs map[string]*string) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "follow-" + hex.EncodeToString(b)
	resp, err := adm.CreateTopic(t.Context(), 1, 1, configs, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return name
}

// startFollower runs a fresh Follower of topic for the test's lifetime.
func startFollower(t *testing.T, cfg Config, topic string) *Follower {
	t.Helper()
	return runFollower(t, cfg, NewFollower(func(*kgo.Record) {}, topic))
}

// runFollower runs f for the test's lifetime.
func runFollower(t *testing.T, cfg Config, f *Follower) *Follower {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("follower: %v", err)
		}
	})
	return f
}

func produce(t *testing.T, cl *kgo.Client, topic string, n int, ts time.Time) []*kgo.Record {
	t.Helper()
	var recs []*kgo.Record
	for range n {
		recs = append(recs, &kgo.Record{Topic: topic, Value: []byte("v"), Timestamp: ts})
	}
	if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return recs
}

// within is the most a wait below may take: far below DefaultSyncTimeout,
// so a test passes only if the wait itself ends, not its bound.
const within = 10 * time.Second

// TestSyncReturnsOnAPartitionEmptiedByRetentionOrTruncation: a reader of
// a partition whose every record is gone (retention, DeleteRecords) has
// nothing to read, so its position never moves by reading; Sync and
// WaitPast must still return, at once and without error.
func TestSyncReturnsOnAPartitionEmptiedByRetentionOrTruncation(t *testing.T) {
	tests := []struct {
		name  string
		empty func(t *testing.T, c *kfake.Cluster, adm *kadm.Client, topic string)
	}{
		{"retention", func(t *testing.T, c *kfake.Cluster, adm *kadm.Client, topic string) {
			if c != nil {
				c.ApplyRetention()
				return
			}
			// A real broker deletes the expired segment (the active one
			// too) at its next retention check.
			waitEmptied(t, adm, topic)
		}},
		{"delete records", func(t *testing.T, _ *kfake.Cluster, adm *kadm.Client, topic string) {
			ends, err := adm.ListEndOffsets(t.Context(), topic)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := adm.DeleteRecords(t.Context(), ends.Offsets())
			if err == nil {
				err = resp.Error()
			}
			if err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, cluster := testBroker(t)
			cl := testClient(t, cfg)
			adm := kadm.NewClient(cl)
			topic := newTopic(t, adm, map[string]*string{
				"retention.ms": kadm.StringPtr("100"),
				"segment.ms":   kadm.StringPtr("100"),
			})
			recs := produce(t, cl, topic, 3, time.Now().Add(-time.Hour))
			tt.empty(t, cluster, adm, topic)
			waitEmptied(t, adm, topic)

			f := startFollower(t, cfg, topic)
			ctx, cancel := context.WithTimeout(t.Context(), within)
			defer cancel()
			if err := f.Sync(ctx, topic); err != nil {
				t.Fatalf("Sync on an emptied partition: %v", err)
			}
			last := recs[len(recs)-1]
			if err := f.WaitPast(ctx, topic, last.Partition, last.Offset); err != nil {
				t.Fatalf("WaitPast a deleted record: %v", err)
			}
		})
	}
}

// waitEmptied waits until the topic's only partition holds no record.
func waitEmptied(t *testing.T, adm *kadm.Client, topic string) {
	t.Helper()
	waitOffsets(t, adm, topic, func(_, start, end int64) bool { return end > 0 && start == end }, "log start at the end")
}

// waitOffsets waits (a minute at most) until ok holds for the last stable,
// log start and end offsets of the topic's only partition, checking every
// 100 ms: brokers change them in the background.
func waitOffsets(t *testing.T, adm *kadm.Client, topic string, ok func(lso, start, end int64) bool, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		starts, err1 := adm.ListStartOffsets(ctx, topic)
		ends, err2 := adm.ListEndOffsets(ctx, topic)
		lsos, err3 := adm.ListCommittedOffsets(ctx, topic)
		if err := errors.Join(err1, err2, err3); err == nil {
			s, _ := starts.Lookup(topic, 0)
			e, _ := ends.Lookup(topic, 0)
			l, _ := lsos.Lookup(topic, 0)
			if ok(l.Offset, s.Offset, e.Offset) {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: waiting for %s: %v", topic, want, ctx.Err())
		case <-tick.C:
		}
	}
}

// TestSyncReturnsWhenAbortedRecordsEndBelowTheLastStableOffset: a
// transaction aborted while another was still open leaves its records
// just below the last stable offset and its abort marker above it. A
// read_committed reader drops those records and cannot read the marker
// yet, so nothing moves its position to the last stable offset; Sync
// must still return while the other transaction stays open.
func TestSyncReturnsWhenAbortedRecordsEndBelowTheLastStableOffset(t *testing.T) {
	cfg, _ := testBroker(t)
	cl := testClient(t, cfg)
	adm := kadm.NewClient(cl)
	topic := newTopic(t, adm, nil)
	committed := produce(t, cl, topic, 1, time.Now()) // offset 0

	suffix := topic[len("follow-"):]
	aborted := testClient(t, cfg, kgo.TransactionalID("aborted-"+suffix))
	open := testClient(t, cfg, kgo.TransactionalID("open-"+suffix))
	for _, c := range []*kgo.Client{aborted, open} {
		if err := c.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
	}
	produce(t, aborted, topic, 2, time.Now()) // offsets 1, 2
	produce(t, open, topic, 1, time.Now())    // offset 3: the LSO while open
	if err := aborted.EndTransaction(t.Context(), kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = open.EndTransaction(context.Background(), kgo.TryAbort) })
	// A broker writes the abort marker after EndTransaction returns.
	waitOffsets(t, adm, topic, func(lso, _, _ int64) bool { return lso == 3 }, "last stable offset 3 (records 1-2 aborted, 3 open)")

	f := startFollower(t, cfg, topic)
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	if err := f.WaitPast(ctx, topic, 0, committed[0].Offset); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(ctx, topic); err != nil {
		t.Fatalf("Sync with aborted records below the last stable offset: %v", err)
	}
}

// TestSyncIsBoundedWithoutACallerDeadline: a caller that passes a context
// without a deadline still gets an answer, ErrSyncTimeout, once the
// Follower's own bound passes.
func TestSyncIsBoundedWithoutACallerDeadline(t *testing.T) {
	f := NewFollower(func(*kgo.Record) {}, "t") // never runs: cannot catch up
	f.syncTimeout = 50 * time.Millisecond
	if err := f.Sync(context.Background(), "t"); !errors.Is(err, ErrSyncTimeout) {
		t.Fatalf("Sync: got %v, want ErrSyncTimeout", err)
	}
	if err := f.WaitPast(context.Background(), "t", 0, 0); !errors.Is(err, ErrSyncTimeout) {
		t.Fatalf("WaitPast: got %v, want ErrSyncTimeout", err)
	}
	// The caller's own deadline is reported as the caller's.
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	f.syncTimeout = time.Hour
	if err := f.Sync(ctx, "t"); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrSyncTimeout) {
		t.Fatalf("Sync past the caller's deadline: got %v", err)
	}
}

// TestAFollowerFromOffsetsWaitsForATopicCreatedAMomentLater: on a
// cluster of several brokers a topic another process just created is
// not known at once to every broker, and ingest's history follower used
// to exit at start with UNKNOWN_TOPIC_OR_PARTITION (make chaos, three
// brokers). Its start now waits for the topic (bounded) and reads it.
func TestAFollowerFromOffsetsWaitsForATopicCreatedAMomentLater(t *testing.T) {
	cfg, _ := testBroker(t)
	cl := testClient(t, cfg)
	adm := kadm.NewClient(cl)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "follow-late-" + hex.EncodeToString(b)
	got := make(chan int, 16)
	f := NewBatchFollower(func(recs []*kgo.Record, _ Offsets) error {
		got <- len(recs)
		return nil
	}, Offsets{}, name)
	runFollower(t, cfg, f) // an error of Run fails the test at cleanup

	// The scenario, not a wait for a condition: the topic appears after
	// the follower first asked for it.
	time.Sleep(300 * time.Millisecond)
	resp, err := adm.CreateTopic(t.Context(), 1, 1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	produce(t, cl, name, 1, time.Now())
	select {
	case n := <-got:
		if n != 1 {
			t.Fatalf("read %d records, want 1", n)
		}
	case <-time.After(within):
		t.Fatal("the follower read nothing of a topic created after it started")
	}
}
