package kafka

import (
	"fmt"
	"time"
)

// The transaction timeout of a transactional service (docs/DESIGN.md
// I42). A transaction stays open on the broker until its producer ends
// it, a producer with the same transactional id fences it (a restarted
// instance does, first thing: Fence), or the coordinator aborts it at
// the timeout. Until then no read-committed reader passes its first
// record in any partition it wrote: a dispatcher killed mid-commit that
// does not come back under its transactional id (scaled down, replaced
// under a new hostname) holds back the retries, results and lanes it
// wrote, and with them every delivery behind them, for the whole
// timeout. Kafka's client default (60 s, franz-go's 40 s) is far longer
// than the session timeout after which the group has already moved the
// dead member's partitions, so the timeout defaults to a small multiple
// of the session timeout: long enough for every legitimate transaction
// (a commit is milliseconds; its End waits for the member's heartbeat,
// through a rebalance that takes at most a dead member's session
// timeout plus the assignment's own reads), short enough that a dead
// member's transaction ends soon after its partitions moved.

// TxnTimeoutSessions is how many session timeouts the default
// transaction timeout is.
const TxnTimeoutSessions = 3

// TxnTimeout returns the transaction timeout to use: set, or, when set
// is 0, TxnTimeoutSessions session timeouts. A set timeout below the
// session timeout is refused: a transaction ending in a rebalance would
// be aborted by the coordinator (and its producer fenced) while it
// legitimately waits.
func TxnTimeout(set, session time.Duration) (time.Duration, error) {
	switch {
	case set == 0 && session <= 0:
		return 0, fmt.Errorf("--session-timeout (%v) must be above 0", session)
	case set == 0:
		return TxnTimeoutSessions * session, nil
	case set < session:
		return 0, fmt.Errorf("--transaction-timeout (%v) must be at least --session-timeout (%v), or 0 for %d session timeouts", set, session, TxnTimeoutSessions)
	}
	return set, nil
}
