package transform

import "sync"

// defaultPoolSize is how many idle runtimes a Program keeps.
const defaultPoolSize = 8

// pool holds up to size idle runtimes of one program. It is safe for
// concurrent use. Unlike sync.Pool it keeps what it holds across garbage
// collections, so a runtime (and its compiled handler) is reused.
type pool struct {
	mu   sync.Mutex
	idle []*vm
	size int
	make func() (*vm, error)
}

func newPool(size int, mk func() (*vm, error)) *pool {
	return &pool{size: size, make: mk}
}

// get returns an idle runtime, or a new one.
func (p *pool) get() (*vm, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		v := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return v, nil
	}
	p.mu.Unlock()
	return p.make()
}

// put returns v to the pool, or drops it when the pool is full.
func (p *pool) put(v *vm) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle) < p.size {
		p.idle = append(p.idle, v)
	}
}
