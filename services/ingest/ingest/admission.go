package ingest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/status"
)

// callOverhead is what a PublishEvent call is charged beyond its payload
// bytes: the request, its records' envelopes, its goroutine.
const callOverhead = 1 << 10

// pushBackDelay is the RetryInfo delay of a pushed-back call: long
// enough for the calls in flight to be confirmed (or to time out), short
// against --publish-timeout. Clients add their own jitter.
const pushBackDelay = time.Second

// queueWait is how long a call that does not fit waits its turn before
// it is pushed back.
const queueWait = time.Second

// admission bounds the bytes of PublishEvent calls one ingest holds at
// once (--max-in-flight-bytes). Without it, when Kafka confirms writes
// slower than producers publish, every call waits in memory until its
// publish timeout and memory grows with the call rate. A call that does
// not fit waits its turn, first come first served, for at most
// queueWait, as long as the calls waiting hold no more than the limit
// too; otherwise it is pushed back at once. First come first served, a
// large call is not overtaken for ever by smaller ones that still fit.
// Safe for concurrent use.
type admission struct {
	mu      sync.Mutex
	limit   int64
	used    int64     // charged to admitted calls
	waiting int64     // charged to calls waiting their turn
	queue   []*waiter // oldest first
}

type waiter struct {
	n     int64
	ready chan struct{} // closed once admitted
}

// cost is what a call is charged: its payload once as received, and its
// delivery records, which a fan-out holds at most fanOutWindow of at
// once (or one record, when larger) until Kafka acknowledges them.
func cost(payloadBytes, endpoints int) int64 {
	records := min(int64(payloadBytes)*int64(endpoints), max(fanOutWindow, int64(payloadBytes)))
	return int64(payloadBytes) + records + callOverhead
}

// fits reports whether n more bytes may be admitted now. A call larger
// than the whole limit fits when nothing else is admitted, so every call
// the payload limit allows can pass. a.mu is held.
func (a *admission) fits(n int64) bool { return a.used == 0 || a.used+n <= a.limit }

// admit charges n bytes: at once if nobody waits and they fit, else after
// waiting its turn for at most wait (and ctx). It reports false when the
// call is to be pushed back: the waiting calls already hold the limit, or
// its turn did not come in time.
func (a *admission) admit(ctx context.Context, n int64, wait time.Duration) bool {
	a.mu.Lock()
	if len(a.queue) == 0 && a.fits(n) {
		a.used += n
		a.mu.Unlock()
		return true
	}
	if a.waiting > 0 && a.waiting+n > a.limit {
		a.mu.Unlock()
		return false
	}
	w := &waiter{n: n, ready: make(chan struct{})}
	a.queue = append(a.queue, w)
	a.waiting += n
	a.mu.Unlock()

	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-w.ready:
		return true
	case <-ctx.Done():
	case <-t.C:
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case <-w.ready: // admitted while the wait ended: the caller releases
		return true
	default:
	}
	a.queue = slices.DeleteFunc(a.queue, func(q *waiter) bool { return q == w })
	a.waiting -= n
	a.grant() // those behind w may fit now
	return false
}

// grant admits waiting calls in order while the first fits. a.mu is held.
func (a *admission) grant() {
	for len(a.queue) > 0 && a.fits(a.queue[0].n) {
		w := a.queue[0]
		a.queue[0] = nil
		a.queue = a.queue[1:]
		a.waiting -= w.n
		a.used += w.n
		close(w.ready)
	}
}

// release returns n bytes admit charged to the call of ctx and admits
// who waits next.
func (a *admission) release(_ context.Context, n int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.used -= n
	a.grant()
}

// pushBack is the status of a call refused by admission.
func (a *admission) pushBack(n int64) error {
	return retryLater(pushBackDelay, fmt.Sprintf(
		"ingest holds its limit of %d bytes of publishes not yet confirmed by Kafka (--max-in-flight-bytes); this call needs %d: retry after the RetryInfo delay, with the same idempotency key",
		a.limit, n))
}

// admitWrite charges n bytes of a write other than a publish (a recover
// batch, a resend, a test event) to admission, waiting its turn for at
// most --publish-timeout (and ctx): these calls are not latency
// sensitive, but they share the budget publishes have. It answers the
// push-back of admission when the turn does not come.
func (s *Service) admitWrite(ctx context.Context, n int64) error {
	wctx, cancel := context.WithTimeout(ctx, s.cfg.PublishTimeout)
	defer cancel()
	for {
		if s.admission.admit(wctx, n, queueWait) {
			return nil
		}
		// Pushed back (at once, when its tenant's waiting calls hold its
		// share): try again after the delay a client would wait.
		t := time.NewTimer(pushBackDelay)
		select {
		case <-t.C:
		case <-wctx.Done():
			t.Stop()
			if ctx.Err() != nil {
				return status.FromContextError(ctx.Err()).Err()
			}
			return s.admission.pushBack(n)
		}
	}
}
