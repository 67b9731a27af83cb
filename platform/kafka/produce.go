package kafka

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ProduceAcked produces rs on cl and waits until every record is
// acknowledged or ctx ends, whichever comes first. It returns the first
// record's error, or ctx's error when ctx ended first.
//
// Unlike kgo's ProduceSync it answers at ctx's deadline even when a
// produce request is already on the wire: kgo cannot call back a request
// in flight, and waits for its answer however long the broker takes. A
// ctx error therefore means "not known to be written": the records may
// still be written afterwards. Records not yet sent when ctx ends are
// failed by kgo and never written. Safe for concurrent use.
func ProduceAcked(ctx context.Context, cl *kgo.Client, rs ...*kgo.Record) error {
	if len(rs) == 0 {
		return nil
	}
	var (
		mu    sync.Mutex
		first error
		left  = len(rs)
		done  = make(chan struct{})
	)
	for _, r := range rs {
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = err
			}
			if left--; left == 0 {
				close(done)
			}
		})
	}
	select {
	case <-done:
		mu.Lock()
		defer mu.Unlock()
		return first
	case <-ctx.Done():
		select {
		case <-done: // acknowledged just in time
			mu.Lock()
			defer mu.Unlock()
			return first
		default:
			return ctx.Err()
		}
	}
}
