package celfilter

import (
	lru "github.com/hashicorp/golang-lru/v2"
)

// DefaultCacheSize is how many compiled filters a Cache holds by default.
const DefaultCacheSize = 4096

// Cache holds compiled filters by expression text, the most recently
// used up to its size, so that a filter is compiled once however many
// endpoints and events use it, and again only after it was evicted. An
// expression that does not compile is remembered with its error. It is
// safe for concurrent use.
type Cache struct {
	filters *lru.Cache[string, compiled]
}

type compiled struct {
	f   *Filter
	err error
}

// NewCache returns a Cache of up to size filters (DefaultCacheSize when
// size < 1).
func NewCache(size int) *Cache {
	if size < 1 {
		size = DefaultCacheSize
	}
	c, err := lru.New[string, compiled](size)
	if err != nil { // only for size < 1
		panic(err)
	}
	return &Cache{filters: c}
}

// Get returns expr compiled, compiling it unless it is cached.
func (c *Cache) Get(expr string) (*Filter, error) {
	if v, ok := c.filters.Get(expr); ok {
		return v.f, v.err
	}
	f, err := Compile(expr)
	c.filters.Add(expr, compiled{f, err})
	return f, err
}

// Add caches f, compiled by the caller, under its expression.
func (c *Cache) Add(f *Filter) { c.filters.Add(f.Expression(), compiled{f: f}) }

// Len returns how many expressions the cache holds.
func (c *Cache) Len() int { return c.filters.Len() }
