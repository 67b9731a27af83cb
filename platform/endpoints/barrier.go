package endpoints

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// roundTimeout bounds one shared sync round; each caller's own context
// bounds its wait.
const roundTimeout = 30 * time.Second

var errStopped = errors.New("endpoints: store stopped")

// Barrier waits until the view holds every endpoint record committed
// before Barrier was called, like Sync, but concurrent callers share the
// work: at most one sync round (list the topic's last stable offsets,
// wait to pass them) runs at a time, and every call that arrives while
// one runs joins the next round, which starts when the running one ends.
// A round that starts after a call arrived lists offsets at least as new
// as the call needed, so each call gets read-your-writes for at most two
// rounds of latency, and Kafka sees one ListOffsets per round, however
// many calls there are. It is what a publish calls before fan-out. Safe
// for concurrent use.
func (s *Store) Barrier(ctx context.Context) error {
	select {
	case <-s.followReady:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.barrier.join(ctx, s.runCtx)
}

// barrier coalesces sync rounds.
type barrier struct {
	sync func(context.Context) error

	mu      sync.Mutex
	running bool
	stopped bool
	next    *round        // the round that calls arriving now join
	joined  chan struct{} // closed and replaced when a call joins
	wg      sync.WaitGroup
	rounds  atomic.Int64 // rounds run, for measuring
}

type round struct {
	done    chan struct{}
	err     error
	waiters int
}

func (b *barrier) join(ctx, runCtx context.Context) error {
	b.mu.Lock()
	if b.next == nil {
		b.next = &round{done: make(chan struct{})}
	}
	r := b.next
	r.waiters++
	if b.joined != nil {
		close(b.joined)
		b.joined = nil
	}
	if !b.running {
		b.startLocked(runCtx)
	}
	b.mu.Unlock()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// joinedCh returns a channel closed when the next call joins a round.
func (b *barrier) joinedCh() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.joined == nil {
		b.joined = make(chan struct{})
	}
	return b.joined
}

// startLocked runs the next round; b.mu is held and b.next is set.
func (b *barrier) startLocked(runCtx context.Context) {
	r := b.next
	b.next = nil
	if b.stopped {
		r.err = errStopped
		close(r.done)
		return
	}
	b.running = true
	b.rounds.Add(1)
	b.wg.Go(func() {
		ctx, cancel := context.WithTimeout(runCtx, roundTimeout)
		r.err = b.sync(ctx)
		cancel()
		close(r.done)
		b.mu.Lock()
		defer b.mu.Unlock()
		b.running = false
		if b.next != nil {
			b.startLocked(runCtx)
		}
	})
}

// wait stops new rounds and waits for the running one (which ends with
// the store's context).
func (b *barrier) wait() {
	b.mu.Lock()
	b.stopped = true
	b.mu.Unlock()
	b.wg.Wait()
}
