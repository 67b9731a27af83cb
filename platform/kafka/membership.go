package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A group member that stops heartbeating for longer than its session
// timeout (a freeze, a long GC or SIGSTOP pause, a partition from the
// coordinator) is expelled: the group gives its partitions to the
// others, who consume and commit them. When it comes back, franz-go does
// not always see a loss. Its next heartbeat may be answered
// REBALANCE_IN_PROGRESS (the group is rebalancing when it returns); it
// then joins again with its old member id, is told UNKNOWN_MEMBER_ID,
// and joins once more as a new member, keeping what it believed it
// owned: the new assignment is diffed against that (partitions it gets
// again are "kept", with the cursors it had; the others are revoked,
// not lost). Everything it derived before it was expelled is stale then,
// and a commit under the new membership is one Kafka accepts, whatever
// partitions it names (a coordinator checks the member and generation of
// an offset commit, not who owns the partitions): the revoke's hand-off
// commits work the partitions' other owner has committed too (two
// terminal results), a kept partition's stale cursor rewinds what that
// owner committed (make sim seed 61).
//
// A member id is what tells: franz-go keeps it for as long as the
// member belongs to the group without a break, and an expelled member
// joins again only as a new one. So a Membership remembers the member id
// its session's partitions were assigned under; once the client's member
// id is another, the session's state is stale: it is ended (ErrExpelled)
// and a new one runs from what Kafka committed, as after a crash, and no
// commit under the new id carries the old session's work (CommitAs).

// ErrExpelled says a group session's member was expelled and joined
// again as a new member: the session must end and a new one run
// (Resume).
var ErrExpelled = errors.New("the group expelled this member (its session timed out) and it joined again as a new member; running a new session")

// Membership is the member id a group session's partitions were
// assigned under. Safe for concurrent use (partition callbacks and
// commit hooks run on the client's goroutines).
type Membership struct {
	mu     sync.Mutex
	id     string // "" before the first assignment, and after a loss
	lapsed string // the member id seen once the membership lapsed
}

// Assigned is called from every OnPartitionsAssigned callback with the
// client's member id then: the first one of the session (or the first
// after a loss) is the membership's.
func (m *Membership) Assigned(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.id == "":
		m.id = id
	case id != m.id && m.lapsed == "":
		m.lapsed = id
	}
}

// Lost is called from OnPartitionsLost: the partitions, and everything
// derived from them, are dropped, and the next assignment, fetched from
// the committed offsets, starts the membership again.
func (m *Membership) Lost() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lapsed == "" {
		m.id = ""
	}
}

// Check returns ErrExpelled when the member id the client has now (id)
// is not the one the session's partitions were assigned under, and
// remembers that it lapsed: a lapsed membership stays lapsed.
func (m *Membership) Check(id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lapsed == "" && m.id != "" && id != m.id {
		m.lapsed = id
		if id == "" {
			m.lapsed = "(none)"
		}
	}
	if m.lapsed == "" {
		return nil
	}
	return fmt.Errorf("%w (member %q, now %q)", ErrExpelled, m.id, m.lapsed)
}

// CheckClient is Check with the client's member id now.
func (m *Membership) CheckClient(cl *kgo.Client) error {
	id, _ := cl.GroupMetadata()
	return m.Check(id)
}

// CommitAs checks an offset commit's member id (from a pre-commit hook):
// a commit under another member than the session's fails with an error
// wrapping REBALANCE_IN_PROGRESS, which makes the session abort the
// transaction (nothing of it is written) rather than fail.
func (m *Membership) CommitAs(req *kmsg.TxnOffsetCommitRequest) error {
	if err := m.Check(req.MemberID); err != nil {
		return fmt.Errorf("%w: %w; aborting the commit", kerr.RebalanceInProgress, err)
	}
	return nil
}

// Guard returns ctx with a pre-commit hook that is CommitAs, for a
// session that has no hook of its own.
func (m *Membership) Guard(ctx context.Context) context.Context {
	return kgo.PreTxnCommitFnContext(ctx, m.CommitAs)
}
