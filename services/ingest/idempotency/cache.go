package idempotency

import (
	"sync"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/protobuf/proto"
)

// CacheBytes bounds the whole claim records one ingest keeps for
// the repeats of recent claims (4 MiB: a few dozen claims of 1,000
// endpoints, thousands of small ones).
const CacheBytes = 4 << 20

// Cache keeps the whole records of the claims this process wrote or
// read back most recently, so a burst of repeats of one key reads its
// claim from the topic at most once. The view keeps every live claim
// without them (Claim). Safe for concurrent use; the zero value is
// ready.
type Cache struct {
	mu    sync.Mutex
	bytes int
	byID  map[string]*hooklinev1.IdempotencyRecord
	order []string // claim ids, oldest first
}

// Get returns the whole record of claim id, or nil.
func (c *Cache) Get(id string) *hooklinev1.IdempotencyRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byID[id]
}

// Put keeps full (not to be changed after), dropping the oldest records
// beyond CacheBytes; a record larger than that is not kept.
func (c *Cache) Put(full *hooklinev1.IdempotencyRecord) {
	n := proto.Size(full)
	if n > CacheBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil {
		c.byID = map[string]*hooklinev1.IdempotencyRecord{}
	}
	if _, ok := c.byID[full.GetClaimId()]; ok {
		return
	}
	for c.bytes+n > CacheBytes && len(c.order) > 0 {
		old := c.order[0]
		c.order = c.order[1:]
		c.bytes -= proto.Size(c.byID[old])
		delete(c.byID, old)
	}
	c.byID[full.GetClaimId()] = full
	c.order = append(c.order, full.GetClaimId())
	c.bytes += n
}
