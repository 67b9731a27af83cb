package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// What a transactional service does when ending a transaction fails, in
// one home (docs/DESIGN.md I40, "A transaction whose end failed with its
// outcome unknown"):
//
//   - an end that fails for a reason Kafka says passes (a retriable
//     error, a broker or coordinator out of reach, a timeout) leaves the
//     outcome unknown: the coordinator may have committed the
//     transaction, aborted it, or still hold it open. franz-go refuses
//     to retry the commit, and its session rewinds to the offsets it
//     knew were committed, which, if the commit did happen, are below
//     work already written. TransactEach reports ErrUnconfirmed;
//   - the service then ends the session, with everything it derived
//     from its own work, and runs a new one (Resume) after the shared
//     abort backoff. The new session first fences the transactional id
//     (Fence), which makes the coordinator finish the transaction either
//     way, then reads its offsets from the broker, so it resumes exactly
//     after what was committed: nothing lost, nothing written twice (I3);
//   - only a failure no new session can cure (fenced by another live
//     instance with the same transactional id, not authorized) ends the
//     service, with a message that says so.

// ErrUnconfirmed says a transaction's end failed with its outcome
// unknown: the session must end and a new one run (Resume).
var ErrUnconfirmed = errors.New("transaction outcome unconfirmed; running a new session")

// EndFatal reports whether err, from ending a transaction, is one no new
// session can cure: the transactional id is used by another live
// instance (fenced), or is not authorized.
func EndFatal(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed) ||
		errors.Is(err, kerr.GroupAuthorizationFailed) || errors.Is(err, kerr.TopicAuthorizationFailed)
}

// Unconfirmed reports whether err, from ending a transaction, leaves its
// outcome unknown in a way a new session cures: an error Kafka says is
// retriable, a broker out of reach, a timeout, or a producer id the
// coordinator no longer knows (a new session gets a new one).
func Unconfirmed(err error) bool {
	if err == nil || EndFatal(err) {
		return false
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable || errors.Is(err, kerr.UnknownServerError) || errors.Is(err, kerr.TransactionAbortable) ||
			errors.Is(err, kerr.UnknownProducerID) || errors.Is(err, kerr.InvalidProducerIDMapping) ||
			errors.Is(err, kerr.InvalidTxnState)
	}
	// kgo does not retry a connection the broker closed at its first
	// read, nor a refused dial: it cannot tell a broker that died from
	// a TLS or SASL mismatch. Here the session already ran transactions
	// on this cluster (a mismatch fails at the fence, before any), so
	// it is a broker out of reach: the transaction coordinator killed,
	// or a link cut (make chaos: "exits by themselves").
	var firstRead *kgo.ErrFirstReadEOF
	var netErr *net.OpError
	if errors.As(err, &firstRead) || errors.As(err, &netErr) {
		return true
	}
	return kgo.IsRetryableBrokerErr(err) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded)
}

// endError is what TransactEach returns for a failed End.
func endError(err error) error {
	switch {
	case Unconfirmed(err):
		return fmt.Errorf("end transaction: %w: %w", ErrUnconfirmed, err)
	case EndFatal(err):
		return fmt.Errorf("end transaction: fenced or not authorized (is another instance running with the same transactional id?): %w", err)
	default:
		return fmt.Errorf("end transaction: %w", err)
	}
}

// Resume runs session, one transactional session of a service from its
// fence to its end, and runs it again, after the shared abort backoff,
// each time it ends with ErrUnconfirmed or ErrExpelled (membership.go),
// until it ends otherwise or ctx does. session must return only once everything it started has ended,
// and must begin from the state a freshly started process has: a new
// session is a restart without the exit. name labels the log lines.
// The backoff doubles from AbortBackoffMin up to TransientBackoffMax
// over sessions that end this way in a row; a session that lasted
// longer than TransientBackoffMax starts the count again.
func Resume(ctx context.Context, log *slog.Logger, name string, session func(context.Context) error) error {
	n := 0
	for {
		began := time.Now()
		err := session(ctx)
		if !errors.Is(err, ErrUnconfirmed) && !errors.Is(err, ErrExpelled) || ctx.Err() != nil {
			return err
		}
		if time.Since(began) > TransientBackoffMax {
			n = 0
		}
		n++
		wait := AbortBackoff(n, AbortTransient)
		why := ": a transaction ended with its outcome unknown; starting a new session after a backoff"
		if errors.Is(err, ErrExpelled) {
			why = ": the group expelled the session's member; starting a new session after a backoff"
		}
		log.Warn(name+why, "err", err, "sessions_in_a_row", n, "backoff", wait)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil
		}
	}
}
