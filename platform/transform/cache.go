package transform

import (
	lru "github.com/hashicorp/golang-lru/v2"
)

// DefaultCacheSize is how many compiled transformations a Cache holds by
// default.
const DefaultCacheSize = 1024

// Cache holds compiled transformations by scope (the tenant) and the
// hash of their source, the most recently used up to its size, so that a
// script version is compiled once and its runtimes reused. A runtime
// keeps the script's globals from one run to the next, so runtimes are
// never shared between scopes: two tenants with the same script get a
// program each, and neither can read what the other's runs left. A script that does not compile is
// remembered with its error. It is safe for concurrent use.
type Cache struct {
	programs *lru.Cache[cacheKey, compiled]
}

type cacheKey struct {
	scope string
	h     Hash
}

type compiled struct {
	p   *Program
	err error
}

// NewCache returns a Cache of up to size programs (DefaultCacheSize when
// size < 1).
func NewCache(size int) *Cache {
	if size < 1 {
		size = DefaultCacheSize
	}
	c, err := lru.New[cacheKey, compiled](size)
	if err != nil { // only for size < 1
		panic(err)
	}
	return &Cache{programs: c}
}

// Get returns src compiled for scope, compiling it unless it is cached.
func (c *Cache) Get(scope, src string) (*Program, error) {
	h := cacheKey{scope, HashOf(src)}
	if v, ok := c.programs.Get(h); ok {
		return v.p, v.err
	}
	p, err := Compile(src)
	c.programs.Add(h, compiled{p, err})
	return p, err
}

// Len returns how many scripts the cache holds.
func (c *Cache) Len() int { return c.programs.Len() }
