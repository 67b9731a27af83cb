package dispatcher

import (
	"crypto/sha256"
	"sync"
)

// transformStreaks is, per endpoint, whether its transformation is in a
// failing streak, and for which version of the script: the first failed
// transformation after none (or after a success) sends one
// endpoint.transformation_failing notice, the next ones none, until a
// delivery of the endpoint whose transformation succeeded is attempted,
// or the endpoint's script changes. It is kept in memory: after a
// restart or a rebalance a streak still going sends one notice more. It
// holds only endpoints in a streak and is pruned of deleted ones
// (pruneState). Safe for concurrent use.
type transformStreaks struct {
	mu      sync.Mutex
	failing map[string][sha256.Size]byte // endpoint id → the script that fails
}

func newTransformStreaks() *transformStreaks {
	return &transformStreaks{failing: map[string][sha256.Size]byte{}}
}

// failed records a failed transformation of endpoint id's script src and
// reports whether it starts a streak (a notice is due).
func (t *transformStreaks) failed(id, src string) bool {
	h := sha256.Sum256([]byte(src))
	t.mu.Lock()
	defer t.mu.Unlock()
	if cur, ok := t.failing[id]; ok && cur == h {
		return false
	}
	t.failing[id] = h
	return true
}

// succeeded ends endpoint id's streak, if any.
func (t *transformStreaks) succeeded(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.failing, id)
}

// prune forgets the endpoints gone says are gone.
func (t *transformStreaks) prune(gone func(id string) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id := range t.failing {
		if gone(id) {
			delete(t.failing, id)
		}
	}
}
