package kafka

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAMembershipLapsesWhenTheMemberIDChangesWithoutALoss: the member id
// a session's partitions were assigned under holds across rebalances;
// another one (an expelled member that joined again, which franz-go may
// report as a revoke rather than a loss) ends the session, and a commit
// under it aborts. After a loss, the next assignment starts afresh.
func TestAMembershipLapsesWhenTheMemberIDChangesWithoutALoss(t *testing.T) {
	var m Membership
	if err := m.Check(""); err != nil {
		t.Fatalf("before any assignment: %v", err)
	}
	m.Assigned("a-1")
	m.Assigned("a-1") // a cooperative rebalance: the same member
	if err := m.Check("a-1"); err != nil {
		t.Fatalf("the same member: %v", err)
	}
	if err := m.CommitAs(&kmsg.TxnOffsetCommitRequest{MemberID: "a-1"}); err != nil {
		t.Fatalf("a commit as the same member: %v", err)
	}

	// A loss drops everything: the next member id is the membership's.
	m.Lost()
	m.Assigned("a-2")
	if err := m.Check("a-2"); err != nil {
		t.Fatalf("after a loss, the new member: %v", err)
	}

	// Expelled, joined again as a new member, no loss seen.
	err := m.CommitAs(&kmsg.TxnOffsetCommitRequest{MemberID: "a-3"})
	if !errors.Is(err, kerr.RebalanceInProgress) || !errors.Is(err, ErrExpelled) {
		t.Fatalf("a commit as another member: %v, want REBALANCE_IN_PROGRESS and ErrExpelled", err)
	}
	// It stays lapsed, even for the old id, an assignment or a loss.
	m.Lost()
	m.Assigned("a-3")
	if err := m.Check("a-2"); !errors.Is(err, ErrExpelled) {
		t.Fatalf("lapsed, then the old id: %v, want ErrExpelled", err)
	}

	// The client's member id cleared (a join told UNKNOWN_MEMBER_ID)
	// lapses it too, as does an assignment under another id.
	var n Membership
	n.Assigned("b-1")
	if err := n.Check(""); !errors.Is(err, ErrExpelled) {
		t.Fatalf("member id cleared: %v, want ErrExpelled", err)
	}
	var o Membership
	o.Assigned("c-1")
	o.Assigned("c-2")
	if err := o.Check("c-2"); !errors.Is(err, ErrExpelled) {
		t.Fatalf("assigned under another id: %v, want ErrExpelled", err)
	}
}
