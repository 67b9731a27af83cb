package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fence takes transactional id over at once: it asks the id's
// transaction coordinator for a new producer epoch, which aborts a
// transaction an earlier instance left open (killed mid-transaction)
// and fences that instance off. Without it the open transaction lasts
// until the new instance first produces — after its group's rebalance,
// which waits out the dead member's session — or until the transaction
// timeout, and read_committed readers of every partition it wrote to see
// nothing past it meanwhile. franz-go initialises its own producer id
// lazily and bumps the epoch again then, which is harmless.
func Fence(ctx context.Context, cl *kgo.Client, transactionalID string, txnTimeout time.Duration) error {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &transactionalID
	req.TransactionTimeoutMillis = int32(txnTimeout / time.Millisecond)
	req.ProducerID, req.ProducerEpoch = -1, -1
	for n := 1; ; n++ {
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
			if err == nil {
				return nil
			}
		}
		// The coordinator answers CONCURRENT_TRANSACTIONS while it
		// finishes the open transaction, and may still be loading or be
		// out of reach while it moves (a broker killed): all of it
		// passes, and a service resuming after a transaction whose end
		// failed (Resume) must not exit for it.
		if ctx.Err() != nil || (!Unconfirmed(err) && !errors.Is(err, kerr.ConcurrentTransactions)) {
			return fmt.Errorf("fence transactional id %q: %w", transactionalID, err)
		}
		t := time.NewTimer(AbortBackoff(n, AbortTransient))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("fence transactional id %q: %w", transactionalID, ctx.Err())
		case <-t.C:
		}
	}
}

// Fence is Fence on a short-lived client of c's: a service runs it before
// it creates its transactional session, so nothing of the session's can
// be produced under the epoch the fence replaces.
func (c Config) Fence(ctx context.Context, transactionalID string, txnTimeout time.Duration) error {
	opts, err := c.Opts()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	return Fence(ctx, cl, transactionalID, txnTimeout)
}
