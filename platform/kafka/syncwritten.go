package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kadm"
)

// SyncWritten waits until every record written to topic before the call
// has been read: applied if its transaction committed, passed over if it
// aborted. It lists the topic's high watermarks now and waits for the
// reader to pass them, so it also waits for the transactions open at the
// call to end.
//
// Sync waits for the last stable offsets instead, which is not enough
// to read what another writer committed just before: a transaction
// coordinator answers EndTxn once the commit is decided and writes the
// commit markers to the partitions afterwards, and until a partition has
// its marker its last stable offset stays below the transaction's
// records. A reader that must hold everything an earlier writer
// committed (a new owner of a partition reading the previous owner's
// last records, a writer reading its own after an abort) uses
// SyncWritten. Like Sync it returns within DefaultSyncTimeout even if ctx
// has no deadline; that failure wraps ErrSyncTimeout.
func (f *Follower) SyncWritten(ctx context.Context, topic string) error {
	ctx, cancel := f.bound(ctx)
	defer cancel()
	if err := f.started(ctx); err != nil {
		return f.failed("sync written "+topic, ctx, err)
	}
	targets, err := f.highWatermarks(ctx, topic)
	if err != nil {
		return f.failed("sync written "+topic, ctx, err)
	}
	if err := f.waitFor(ctx, topic, targets); err != nil {
		return f.failed("sync written "+topic, ctx, err)
	}
	return nil
}

// highWatermarks returns the high watermark of each non-empty partition
// of topic.
func (f *Follower) highWatermarks(ctx context.Context, topic string) (map[int32]int64, error) {
	ends, err := f.adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, err
	}
	targets := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			targets[o.Partition] = o.Offset
		}
	})
	return targets, nil
}
