package ingest

import (
	"context"
	"sync"
)

// keyedMutex is a set of mutexes by key, created on first use and
// dropped when no call holds or waits for them, so it holds state only
// for keys in use. Locking honours the caller's context. The zero value
// is ready; safe for concurrent use.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[string]*keyLock
}

type keyLock struct {
	sem  chan struct{} // one slot: the holder
	refs int           // holders and waiters
}

// lock waits until it holds key's mutex or ctx ends, and returns the
// function that releases it.
func (k *keyedMutex) lock(ctx context.Context, key string) (unlock func(), err error) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyLock{sem: make(chan struct{}, 1)}
		k.locks[key] = l
	}
	l.refs++
	k.mu.Unlock()
	release := func() {
		k.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
	select {
	case l.sem <- struct{}{}:
		return func() { <-l.sem; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}

// size returns how many keys have state, for tests of pruning.
func (k *keyedMutex) size() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.locks)
}
