package console

import (
	"context"
	"sync"
	"time"
)

// Revocations records the sessions that were signed out, so that their
// cookies, presented again, are refused. A session id is revoked until
// the session would have expired anyway.
type Revocations interface {
	// Revoke ends session id, which would expire at until. It returns
	// once every replica sharing the Revocations will refuse it.
	Revoke(ctx context.Context, id string, until time.Time) error
	// Revoked reports whether session id was signed out.
	Revoked(ctx context.Context, id string) (bool, error)
}

// memRevocations is the default Revocations: this Server's memory, so a
// sign-out is known only here (and forgotten at a restart). Safe for
// concurrent use.
type memRevocations struct {
	now func() time.Time
	mu  sync.Mutex
	ids map[string]time.Time
}

func (m *memRevocations) Revoke(_ context.Context, id string, until time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for k, u := range m.ids {
		if !now.Before(u) {
			delete(m.ids, k)
		}
	}
	m.ids[id] = until
	return nil
}

func (m *memRevocations) Revoked(_ context.Context, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.ids[id]
	return ok, nil
}
