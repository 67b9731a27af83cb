package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestALeaderMoveOfTheSimulationLosesNoRecords: a consumer that read a
// partition to its end, whose leader then moves with nothing written
// since, goes on from where it was. With kfake's MoveTopicPartition
// alone it does not: kfake answers the consumer's epoch check with -1,
// and franz-go reports lost records and rereads from the start (the
// simulation's seed 4 once failed so, in ingest's follower).
func TestALeaderMoveOfTheSimulationLosesNoRecords(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	seeds := kgo.SeedBrokers(c.ListenAddrs()...)
	prod, err := kgo.NewClient(seeds, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for i := range 20 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: fmt.Append(nil, i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := kgo.NewClient(seeds, kgo.ConsumeTopics("t"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MetadataMinAge(10*time.Millisecond), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	read := 0
	for read < 20 {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		read += fs.NumRecords()
	}
	p := c.LeaderFor("t", 0)
	if err := moveLeaderMarked(ctx, c, "marker", "t", 0, (p+1)%3); err != nil {
		t.Fatal(err)
	}
	// The consumer meets the new leader (its fetches to the old one fail
	// with NOT_LEADER) and checks its epoch; then one more record.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := cons.PollFetches(pctx)
		pcancel()
		var loss *kgo.ErrDataLoss
		fs.EachError(func(_ string, _ int32, err error) {
			if errors.As(err, &loss) {
				t.Fatalf("after the leader moved: %v", err)
			}
		})
		if n := fs.NumRecords(); n > 0 {
			t.Fatalf("after the leader moved, with nothing committed since: %d records read again", n)
		}
	}
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		if fs.NumRecords() == 0 {
			continue
		}
		if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "after" {
			t.Fatalf("after the leader moved: read %d records, the first %q; want only the one written since", len(recs), recs[0].Value)
		}
		return
	}
}
