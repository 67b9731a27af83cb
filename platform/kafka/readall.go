package kafka

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ReadAll returns every committed record of topic from its start up to
// its last stable offsets as of the call, in offset order per
// partition. It is for tools and tests that inspect a topic whole (what
// a compacted topic holds on disk, say).
func ReadAll(ctx context.Context, cfg Config, topic string) ([]*kgo.Record, error) {
	var (
		mu  sync.Mutex
		out []*kgo.Record
	)
	f := NewFollower(func(r *kgo.Record) {
		mu.Lock()
		out = append(out, r)
		mu.Unlock()
	}, topic)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- f.Run(ctx, cfg)
		cancel() // a failed reader ends the Sync below
	}()
	err := f.Sync(ctx, topic)
	cancel()
	if rerr := <-done; rerr != nil {
		return nil, rerr // the reader's own failure says more
	}
	if err != nil {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	return out, nil
}
