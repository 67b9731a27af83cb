package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFenceEndsADeadInstancesOpenTransaction: a process killed inside a
// transaction leaves it open, and read_committed readers see nothing of
// the partitions it wrote to past its first record (the last stable
// offset stays behind it) until the transaction times out — for a
// scheduler, every delivery published behind a release it was writing.
// Fence, run by the instance that takes the transactional id over,
// aborts it at once.
func TestFenceEndsADeadInstancesOpenTransaction(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "d"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	seeds := kgo.SeedBrokers(c.ListenAddrs()...)

	// The instance that dies: begins, writes, never ends (never closed
	// either, as after kill -9).
	dead, err := kgo.NewClient(seeds, kgo.TransactionalID("sched-0"), kgo.TransactionTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := dead.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := dead.ProduceSync(ctx, &kgo.Record{Topic: "d", Value: []byte("release")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// A delivery published after it by someone else.
	plain, err := kgo.NewClient(seeds)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := plain.ProduceSync(ctx, &kgo.Record{Topic: "d", Value: []byte("delivery")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	reader, err := kgo.NewClient(seeds, kgo.ConsumeTopics("d"), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	sees := func(within time.Duration) []string {
		pctx, pcancel := context.WithTimeout(ctx, within)
		defer pcancel()
		var got []string
		for pctx.Err() == nil {
			reader.PollFetches(pctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
			if len(got) > 0 {
				return got
			}
		}
		return got
	}
	if got := sees(500 * time.Millisecond); len(got) != 0 {
		t.Fatalf("read_committed saw %q behind an open transaction", got)
	}

	next, err := kgo.NewClient(seeds, kgo.TransactionalID("sched-0"), kgo.TransactionTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if err := Fence(ctx, next, "sched-0", time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := sees(10 * time.Second); len(got) != 1 || got[0] != "delivery" {
		t.Fatalf("after the fence read_committed saw %q, want only the delivery (the release aborted)", got)
	}
	dead.Close()
}
