package health

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestProbeCaughtUpThroughKafka: readiness with kadm. The group must be
// Stable; a member holding no partition while the group has no more
// members than partitions is mid-rebalance; with no poll back since the
// assignment (an idle topic keeps a poll waiting), the committed lag
// decides: at most ReadyLag records on every held partition is caught
// up, more is not, until a poll comes back.
func TestProbeCaughtUpThroughKafka(t *testing.T) {
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
	produce(0, ReadyLag+5)
	produce(1, 3)
	adm := kadm.NewClient(cl)
	// Committed while the group is empty: partition 0 is ReadyLag behind,
	// partition 1 is 3 behind.
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "d", Partition: 0, At: 5, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: "d", Partition: 1, At: 0, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(t.Context(), "g", offs); err != nil {
		t.Fatal(err)
	}

	var p Probe
	p.CheckLag(adm, "g", "d")
	p.Started()
	p.Assigned(map[string][]int32{"d": {1}})
	if ok, why := p.Ready(t.Context()); ok || !strings.Contains(why, "group g is Empty, not Stable") {
		t.Fatalf("group without members: Ready = %v %q, want not Stable", ok, why)
	}

	// One real member makes the group Stable (the probe stands for a
	// second member's view; its partitions are what it was told).
	member, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("d"), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	go func() {
		for {
			if member.PollFetches(t.Context()).IsClientClosed() || t.Context().Err() != nil {
				return
			}
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		gs, err := adm.DescribeGroups(t.Context(), "g")
		if err == nil && gs["g"].State == "Stable" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("group g not Stable within 30 s: %v %v", gs, err)
		}
		<-tick.C
	}

	p.Assigned(map[string][]int32{"d": {1}}) // a new assignment: checked again
	if ok, why := p.Ready(t.Context()); !ok || !strings.Contains(why, "committed lag at most") {
		t.Fatalf("3 records behind on the one held partition: Ready = %v %q, want ready by lag", ok, why)
	}
	produce(0, 1) // partition 0 now ReadyLag+1 behind
	p.Assigned(map[string][]int32{"d": {0}})
	if ok, why := p.Ready(t.Context()); ok || !strings.Contains(why, "d/0 is 101 records behind") {
		t.Fatalf("%d records behind: Ready = %v %q, want not ready", ReadyLag+1, ok, why)
	}
	p.PollEnded(p.PollBegins())
	if ok, why := p.Ready(t.Context()); !ok || !strings.Contains(why, "first poll of the assignment back") {
		t.Fatalf("behind, but a poll came back: Ready = %v %q, want ready", ok, why)
	}
	produce(0, 2*ReadyLag)
	if ok, why := p.Ready(t.Context()); !ok {
		t.Fatalf("a caught-up member stays ready until its next assignment: %v %q", ok, why)
	}

	// An empty assignment in a group of no more members than partitions
	// is the first round of a cooperative rebalance.
	p.Revoked(map[string][]int32{"d": {0, 1}})
	p.Assigned(nil)
	p.PollEnded(p.PollBegins())
	if ok, why := p.Ready(t.Context()); ok || !strings.Contains(why, "holds no partition while the group's 1 members share 2 partitions") {
		t.Fatalf("empty assignment, 1 member, 2 partitions: Ready = %v %q, want not ready", ok, why)
	}
}
