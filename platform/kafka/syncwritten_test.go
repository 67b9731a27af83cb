package kafka

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSyncWrittenWaitsForATransactionOpenWhenItBegan: a record of a
// transaction still open (on Apache Kafka: committed, its marker not
// written yet) is above the last stable offset, so Sync may return
// without it; SyncWritten returns only once it was read, applied when
// the transaction committed.
func TestSyncWrittenWaitsForATransactionOpenWhenItBegan(t *testing.T) {
	cfg, _ := testBroker(t)
	cl := testClient(t, cfg)
	adm := kadm.NewClient(cl)
	topic := newTopic(t, adm, nil)
	open := testClient(t, cfg, kgo.TransactionalID("open-"+topic[len("follow-"):]))
	if err := open.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(t, open, topic, 1, time.Now()) // offset 0, its transaction open
	var applied atomic.Int32
	f := runFollower(t, cfg, NewFollower(func(r *kgo.Record) {
		if !r.Attrs.IsControl() {
			applied.Add(1)
		}
	}, topic))
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	if err := f.Sync(ctx, topic); err != nil || applied.Load() != 0 {
		t.Fatalf("Sync with a transaction open: %v, %d applied; want it to return at the last stable offset, nothing applied", err, applied.Load())
	}
	short, cancelShort := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancelShort()
	if err := f.SyncWritten(short, topic); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("SyncWritten with a transaction open: %v; want it waiting (deadline exceeded)", err)
	}
	if err := open.EndTransaction(t.Context(), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if err := f.SyncWritten(ctx, topic); err != nil {
		t.Fatal(err)
	}
	if n := applied.Load(); n != 1 {
		t.Fatalf("%d records applied when SyncWritten returned after the commit; want 1", n)
	}
}
