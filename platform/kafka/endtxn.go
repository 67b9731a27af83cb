package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// What a transactional service does when ending a transaction fails, in
// one home (docs/DESIGN.md, "Ending a transaction that failed to end"):
//
//   - an EndTxn that fails for a reason Kafka says passes (a retriable
//     error, a broker or coordinator out of reach, a timeout) leaves the
//     outcome unknown: the coordinator may have committed it, aborted
//     it, or still hold it open. franz-go refuses to retry the commit
//     (its outcome is unknowable), and its session rewinds to the offsets
//     it knew committed — which, if the commit did happen, are below
//     work already written. TransactEach reports ErrUnconfirmed;
//   - the service then drops everything it holds in memory and runs a
//     fresh session (Resume) after the shared abort backoff: the new
//     session first fences the transactional id (Fence), which makes the
//     coordinator finish the transaction either way, and then reads its
//     offsets from the broker, so it resumes exactly after what was
//     committed: nothing lost, nothing written twice (I3);
//   - only a failure no new session can cure — fenced by another live
//     instance with the same transactional id, not authorized — ends the
//     service, with a message that says so.

// ErrUnconfirmed says a transaction's end failed with its outcome
// unknown: the session must be dropped and a new one run (Resume).
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
// outcome unknown and a new session can cure it: an error Kafka says is
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

// Resume runs run, a service's transactional session from its fence to
// its end, again after the shared abort backoff each time it ends with
// ErrUnconfirmed, until it ends otherwise or ctx does. name labels the
// log lines.
func Resume(ctx context.Context, log *slog.Logger, name string, run func(context.Context) error) error {
	var b Backoff
	for {
		err := run(ctx)
		if !errors.Is(err, ErrUnconfirmed) || ctx.Err() != nil {
			return err
		}
		wait, n := b.Aborted(nil, AbortTransient)
		log.Warn(name+": a transaction ended with its outcome unknown; starting a new session after a backoff",
			"err", err, "sessions_in_a_row", n, "backoff", wait)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil
		}
	}
}
