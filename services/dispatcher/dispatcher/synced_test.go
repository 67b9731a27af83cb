package dispatcher

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTheBalancerRemembersTheLastSyncedAssignment: what the loop
// compares its window with when a partition callback waits (yield.go)
// is this member's assignment from the last SyncGroup, of the
// deliveries topic only.
func TestTheBalancerRemembersTheLastSyncedAssignment(t *testing.T) {
	b := newSyncedBalancer("deliveries")
	if _, ok := b.last(); ok {
		t.Fatal("an assignment before any SyncGroup")
	}
	sync := func(parts ...int32) {
		t.Helper()
		a := kmsg.NewConsumerMemberAssignment()
		a.Version = 1
		for _, topic := range []string{"deliveries", "other"} {
			at := kmsg.NewConsumerMemberAssignmentTopic()
			at.Topic, at.Partitions = topic, parts
			a.Topics = append(a.Topics, at)
		}
		m, err := b.ParseSyncAssignment(a.AppendTo(nil))
		if err != nil {
			t.Fatal(err)
		}
		if len(m["other"]) != len(parts) {
			t.Fatalf("the wrapped balancer's result changed: %v", m)
		}
	}
	sync(0, 1, 2)
	sync(0, 2)
	got, ok := b.last()
	if !ok || len(got) != 2 || !got[tp{"deliveries", 0}] || !got[tp{"deliveries", 2}] || got[tp{"deliveries", 1}] {
		t.Fatalf("last assignment %v (ok %v), want deliveries 0 and 2", got, ok)
	}
}
