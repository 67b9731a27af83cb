package ingest

import (
	"fmt"
	"sync"
	"time"
)

// callOverhead is what a PublishEvent call is charged beyond its payload
// bytes: the request, its records' envelopes, its goroutine.
const callOverhead = 1 << 10

// pushBackDelay is the RetryInfo delay of a pushed-back call: long
// enough for the calls in flight to be confirmed (or to time out), short
// against --publish-timeout. Clients add their own jitter.
const pushBackDelay = time.Second

// admission bounds the bytes of PublishEvent calls one ingest holds at
// once (--max-in-flight-bytes). Without it, when Kafka confirms writes
// slower than producers publish, every call waits in memory until its
// publish timeout and memory grows with the call rate. Safe for
// concurrent use.
type admission struct {
	mu    sync.Mutex
	limit int64
	used  int64
}

// cost is what a call is charged: its payload once as received, and its
// delivery records, which a fan-out holds at most fanOutWindow of at
// once (or one record, when larger) until Kafka acknowledges them.
func cost(payloadBytes, endpoints int) int64 {
	records := min(int64(payloadBytes)*int64(endpoints), max(fanOutWindow, int64(payloadBytes)))
	return int64(payloadBytes) + records + callOverhead
}

// admit charges n bytes, or refuses them when they would pass the limit.
// A call larger than the whole limit is admitted when nothing else is in
// flight, so every call the payload limit allows can pass.
func (a *admission) admit(n int64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.used > 0 && a.used+n > a.limit {
		return false
	}
	a.used += n
	return true
}

// release returns n bytes admit charged.
func (a *admission) release(n int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.used -= n
}

// pushBack is the status of a call refused by admission.
func (a *admission) pushBack(n int64) error {
	return retryLater(pushBackDelay, fmt.Sprintf(
		"ingest holds its limit of %d bytes of publishes not yet confirmed by Kafka (--max-in-flight-bytes); this call needs %d: retry after the RetryInfo delay, with the same idempotency key",
		a.limit, n))
}
