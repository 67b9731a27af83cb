package health

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestProbeCaughtUpByLag: with no poll back since the assignment (an
// idle topic keeps a poll waiting), readiness reads the group's committed
// lag through kadm: at most ReadyLag records on every held partition is
// caught up, more is not.
func TestProbeCaughtUpByLag(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "d"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("d"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(partition int32, n int) {
		t.Helper()
		for range n {
			if err := cl.ProduceSync(t.Context(), &kgo.Record{Partition: partition, Value: []byte("x")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(0, ReadyLag+5) // partition 0: ReadyLag+5 records
	produce(1, 3)          // partition 1: 3 records
	adm := kadm.NewClient(cl)
	commit := func(partition int32, at int64) {
		t.Helper()
		offs := kadm.Offsets{}
		offs.Add(kadm.Offset{Topic: "d", Partition: partition, At: at, LeaderEpoch: -1})
		if err := adm.CommitAllOffsets(t.Context(), "g", offs); err != nil {
			t.Fatal(err)
		}
	}
	commit(0, 0)
	commit(1, 0)

	var p Probe
	p.CheckLag(adm, "g")
	p.Started()
	p.Assigned(map[string][]int32{"d": {1}})
	if ok, why := p.Ready(t.Context()); !ok || !strings.Contains(why, "committed lag at most") {
		t.Fatalf("3 records behind on the one held partition: Ready = %v %q, want ready by lag", ok, why)
	}
	p.Assigned(map[string][]int32{"d": {0}}) // a rebalance adds partition 0
	if ok, why := p.Ready(t.Context()); ok || !strings.Contains(why, "d/0 is 105 records behind") {
		t.Fatalf("%d records behind: Ready = %v %q, want not ready", ReadyLag+5, ok, why)
	}
	commit(0, 5)
	if ok, why := p.Ready(t.Context()); !ok {
		t.Fatalf("%d records behind after a commit: Ready = %v %q, want ready", ReadyLag, ok, why)
	}
	// Once caught up, the member stays ready until its next assignment,
	// whatever the lag does meanwhile.
	produce(0, 2*ReadyLag)
	if ok, why := p.Ready(t.Context()); !ok {
		t.Fatalf("caught-up member reading lag again: %v %q", ok, why)
	}
}
