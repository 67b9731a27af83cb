package dispatcher

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
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

// member is one member's JoinGroup metadata, as the leader sees it.
func joinMember(id string, meta []byte) kmsg.JoinGroupResponseMember {
	m := kmsg.NewJoinGroupResponseMember()
	m.MemberID, m.ProtocolMetadata = id, meta
	return m
}

// leaderPlan balances members as the group's leader does and returns
// each member's assignment of the deliveries topic.
func leaderPlan(t *testing.T, partitions int32, members ...kmsg.JoinGroupResponseMember) map[string][]int32 {
	t.Helper()
	mb, _, err := kgo.CooperativeStickyBalancer().MemberBalancer(members)
	if err != nil {
		t.Fatal(err)
	}
	into, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(map[string]int32{"deliveries": partitions})
	if err != nil {
		t.Fatal(err)
	}
	plan := map[string][]int32{}
	for _, a := range into.IntoSyncAssignment() {
		m, err := kgo.ParseConsumerSyncAssignment(a.MemberAssignment)
		if err != nil {
			t.Fatal(err)
		}
		plan[a.MemberID] = slices.Sorted(slices.Values(m["deliveries"]))
	}
	return plan
}

// TestAMemberWhoseSessionFailedGetsItsPartitionsBack (the chaos storm's
// coordinator kill, docs/reliability.md "The storm row, attributed"):
// when the group's coordinator dies, every member's session fails and
// franz-go joins again owning nothing. Without history the leader
// assigns afresh and partitions change hands; what each member had
// completed on them and could not commit is then POSTed again by the
// other. Each member's join now carries what its lost session owned.
func TestAMemberWhoseSessionFailedGetsItsPartitionsBack(t *testing.T) {
	a, b := newSyncedBalancer("deliveries"), newSyncedBalancer("deliveries")
	a.askBack([]int32{3, 4, 5}, 7)
	b.askBack([]int32{0, 1, 2}, 7)
	// franz-go joins after a lost session with no assignment; the
	// generation it passes is whatever it last stored.
	plan := leaderPlan(t, 6,
		joinMember("a", a.JoinGroupMetadata([]string{"deliveries"}, nil, 7)),
		joinMember("b", b.JoinGroupMetadata([]string{"deliveries"}, nil, -1)))
	if !slices.Equal(plan["a"], []int32{3, 4, 5}) || !slices.Equal(plan["b"], []int32{0, 1, 2}) {
		t.Fatalf("after both sessions failed the leader planned a %v, b %v; want each its own back (a 3-5, b 0-2)", plan["a"], plan["b"])
	}
}

// TestALostSessionsHistoryYieldsToAnOwnerOfALaterGeneration: a member
// that lost its session while the others went on asks for what it had;
// a partition another member owns now, in a later generation, stays
// with that member, nothing is planned to two members, and nothing is
// held back for the member whose history names it (it owns nothing to
// revoke, so a partition waiting for its revoke would wait for ever).
func TestALostSessionsHistoryYieldsToAnOwnerOfALaterGeneration(t *testing.T) {
	a, b := newSyncedBalancer("deliveries"), newSyncedBalancer("deliveries")
	a.askBack([]int32{3, 4, 5}, 7)
	bOwns := []int32{0, 1, 2, 3}
	plan := leaderPlan(t, 6,
		joinMember("a", a.JoinGroupMetadata([]string{"deliveries"}, nil, 7)),
		joinMember("b", b.JoinGroupMetadata([]string{"deliveries"}, map[string][]int32{"deliveries": bOwns}, 9)))
	for _, p := range plan["a"] {
		if slices.Contains(plan["b"], p) {
			t.Fatalf("partition %d planned to both: a %v, b %v", p, plan["a"], plan["b"])
		}
		if slices.Contains(bOwns, p) {
			t.Fatalf("partition %d, owned by b in generation 9, planned to a (history of generation 7) in the same round: a %v, b %v", p, plan["a"], plan["b"])
		}
	}
	for p := range int32(6) {
		if !slices.Contains(plan["a"], p) && !slices.Contains(plan["b"], p) && !slices.Contains(bOwns, p) {
			t.Fatalf("partition %d, owned by no one, planned to no one (a %v, b %v)", p, plan["a"], plan["b"])
		}
	}
	if !slices.Contains(plan["a"], 4) || !slices.Contains(plan["a"], 5) {
		t.Fatalf("a's history 4 and 5, owned by no one, went elsewhere: a %v, b %v", plan["a"], plan["b"])
	}
}

// TestALostSessionsHistoryIsAskedForOnce: once a SyncGroup answers the
// join, the member's metadata is the wrapped balancer's again.
func TestALostSessionsHistoryIsAskedForOnce(t *testing.T) {
	b := newSyncedBalancer("deliveries")
	plain := b.JoinGroupMetadata([]string{"deliveries"}, nil, 3)
	b.askBack([]int32{1}, 3)
	if slices.Equal(b.JoinGroupMetadata([]string{"deliveries"}, nil, 3), plain) {
		t.Fatal("a join after a lost session carries no history")
	}
	a := kmsg.NewConsumerMemberAssignment()
	if _, err := b.ParseSyncAssignment(a.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(b.JoinGroupMetadata([]string{"deliveries"}, nil, 3), plain) {
		t.Fatal("the history was asked for again after a SyncGroup answered")
	}
}

// TestARestartedStaticLeaderPlansWhatTheGroupStillAssignsIt (the chaos
// rolling upgrade, docs/reliability.md "The rolling upgrade's p99"): a
// static member that restarts rejoins with no owned partitions, and
// when it is the group's leader the coordinator has it plan (KIP-814)
// from the metadata each member sent at its last join — the other
// member's from before it owned anything. franz-go compares that plan
// with the assignment the coordinator kept for the instance and, when
// they differ, joins again to force a rebalance, during which the
// restarted member fetches nothing: 0.35-0.5 s more of a gap its
// partitions' healthy deliveries wait through. Asking back what the
// group still assigns the instance (askOwnBack) makes the plan the kept
// one, and the rebalance does not happen.
func TestARestartedStaticLeaderPlansWhatTheGroupStillAssignsIt(t *testing.T) {
	kept := map[string][]int32{"a": {3, 4, 5}, "b": {0, 1, 2}}
	// b's metadata as the coordinator holds it: from b's last join,
	// when it owned nothing yet (the cooperative hand-off's first round).
	b := newSyncedBalancer("deliveries")
	bStale := b.JoinGroupMetadata([]string{"deliveries"}, nil, 2)

	fresh := newSyncedBalancer("deliveries")
	plan := leaderPlan(t, 6,
		joinMember("a", fresh.JoinGroupMetadata([]string{"deliveries"}, nil, -1)),
		joinMember("b", bStale))
	if slices.Equal(plan["a"], kept["a"]) {
		t.Fatalf("without asking back, the restarted leader planned its kept assignment %v anyway: this test shows nothing", plan["a"])
	}

	restarted := newSyncedBalancer("deliveries")
	restarted.askBack(kept["a"], 3)
	plan = leaderPlan(t, 6,
		joinMember("a", restarted.JoinGroupMetadata([]string{"deliveries"}, nil, -1)),
		joinMember("b", bStale))
	if !slices.Equal(plan["a"], kept["a"]) || !slices.Equal(plan["b"], kept["b"]) {
		t.Fatalf("the restarted leader planned a %v, b %v; want the kept assignment (a %v, b %v)", plan["a"], plan["b"], kept["a"], kept["b"])
	}
}
