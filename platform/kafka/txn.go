package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TransactEach writes recs in one transaction of sess together with the
// offsets the session will commit: it begins, produces, flushes, runs
// beforeEnd (if set; the place to adjust offsets with SetOffsets), and
// ends, committing only if every record was written. failed, if set, is
// called with each record that was not written and its error (from the
// producer's goroutines, one call at a time), so that a caller can tell
// which records a broker refused. committed is false when the
// transaction was aborted, by a failed record (produceErr says which) or
// by a rebalance; the session has then rewound to its committed offsets.
// err is a failure of the session itself; one wrapping ErrUnconfirmed
// (an End whose outcome is unknown) asks for a new session (Resume,
// endtxn.go).
//
// A started transaction is always ended, whatever ctx does, but it is
// never waited on for longer than within, the transaction timeout: past
// it the coordinator aborts the transaction anyway, and what a flush or
// an End still waits on is something else (seen: an End waiting 70 s
// for a JoinGroup the broker never answered, after the process had been
// frozen beyond its session and the coordinator had moved; make sim
// seed 43, docs/reliability.md). Its outcome is then unknown: the next
// session fences it (I40).
func TransactEach(ctx context.Context, sess *kgo.GroupTransactSession, within time.Duration, recs []*kgo.Record, beforeEnd func(), failed func(*kgo.Record, error)) (committed bool, produceErr error, err error) {
	if err := sess.Begin(); err != nil {
		return false, nil, fmt.Errorf("begin transaction: %w", err)
	}
	// The records are produced under a context that never ends: kgo
	// keeps the first produce's context in the record (Record.Context)
	// and fails it once that context is done, and a commit that aborts
	// produces the same records again in its next transaction.
	ctx = context.WithoutCancel(ctx)
	bounded, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	var mu sync.Mutex
	for _, r := range recs {
		sess.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				produceErr = errors.Join(produceErr, err)
				if failed != nil {
					failed(r, err)
				}
				mu.Unlock()
			}
		})
	}
	if err := sess.Client().Flush(bounded); err != nil {
		return false, nil, fmt.Errorf("flush: %w: %w", ErrUnconfirmed, err)
	}
	if beforeEnd != nil {
		beforeEnd()
	}
	end := kgo.TryCommit
	if produceErr != nil {
		end = kgo.TryAbort
	}
	committed, err = sess.End(bounded, end)
	if err != nil {
		return false, produceErr, endError(err) // ErrUnconfirmed: run a new session (Resume)
	}
	return committed, produceErr, nil
}

// Ensure connects with c's options and ensures specs (see EnsureTopics).
func (c Config) Ensure(ctx context.Context, specs []TopicSpec) error {
	opts, err := c.Opts()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafka: client: %w", err)
	}
	defer cl.Close()
	return c.EnsureTopics(ctx, kadm.NewClient(cl), specs)
}
