package ingest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hookline/hookline/services/ingest/apikey"
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

// admission bounds the bytes of the writes one ingest holds at once
// (--max-in-flight-bytes): PublishEvent calls, recover batches, resends
// and test events. Without it, when Kafka confirms writes slower than
// producers publish, every call waits in memory until its publish
// timeout and memory grows with the call rate.
//
// The budget is shared fairly across tenants (the tenant of the call's
// principal). While k tenants hold or wait for bytes, each may hold a
// share of limit/k; alone, a tenant may hold it all. A call that does
// not fit waits its turn for at most queueWait: in one queue in arrival
// order, where a call is admitted when it fits both the budget and its
// tenant's share and no earlier call of its own tenant waits — so a
// tenant's calls are first come first served among themselves (a large
// one is not overtaken for ever by its smaller ones), while a tenant
// under its share is not kept behind a flooding tenant's queue. A call
// is pushed back at once when its own tenant's waiting calls already
// hold that tenant's share. Safe for concurrent use; the zero value with
// a limit is ready.
type admission struct {
	mu      sync.Mutex
	limit   int64
	used    int64                 // charged to admitted calls
	waiting int64                 // charged to calls waiting their turn
	queue   []*waiter             // oldest first
	tenants map[string]*tenantUse // tenants holding or waiting for bytes
	// writeWait is how long a write other than a publish waits its turn
	// (admitWrite): --publish-timeout.
	writeWait time.Duration
}

// tenantUse is one tenant's part of the admission state.
type tenantUse struct {
	used    int64
	waiting int64
	waiters int
}

type waiter struct {
	tenant string
	n      int64
	ready  chan struct{} // closed once admitted
}

// cost is what a call is charged: its payload once as received, and its
// delivery records, which a fan-out holds at most fanOutWindow of at
// once (or one record, when larger) until Kafka acknowledges them.
func cost(payloadBytes, endpoints int) int64 {
	records := min(int64(payloadBytes)*int64(endpoints), max(fanOutWindow, int64(payloadBytes)))
	return int64(payloadBytes) + records + callOverhead
}

// use returns tenant's state, made if needed. a.mu is held.
func (a *admission) use(tenant string) *tenantUse {
	if a.tenants == nil {
		a.tenants = map[string]*tenantUse{}
	}
	u := a.tenants[tenant]
	if u == nil {
		u = &tenantUse{}
		a.tenants[tenant] = u
	}
	return u
}

// forget drops tenant's state once it holds and waits for nothing.
// a.mu is held.
func (a *admission) forget(tenant string, u *tenantUse) {
	if u.used == 0 && u.waiters == 0 {
		delete(a.tenants, tenant)
	}
}

// share is what one tenant may hold while the tenants in a.tenants
// (tenant u among them) want bytes. a.mu is held.
func (a *admission) share() int64 { return a.limit / int64(max(1, len(a.tenants))) }

// fits reports whether n more bytes of tenant u may be admitted now. A
// call larger than the whole budget or its tenant's share fits when
// nothing else is admitted (of its tenant, and at all), so every call
// the payload limit allows can pass. a.mu is held.
func (a *admission) fits(u *tenantUse, n int64) bool {
	return (a.used == 0 || a.used+n <= a.limit) && (u.used == 0 || u.used+n <= a.share())
}

// admit charges n bytes to the tenant of ctx's principal: at once if
// none of its calls waits and they fit, else after waiting its turn for
// at most wait (and ctx). It reports false when the call is to be pushed
// back: its tenant's waiting calls already hold its share, or its turn
// did not come in time.
func (a *admission) admit(ctx context.Context, n int64, wait time.Duration) bool {
	tenant := apikey.TenantFrom(ctx)
	a.mu.Lock()
	u := a.use(tenant)
	if u.waiters == 0 && a.fits(u, n) {
		a.used += n
		u.used += n
		a.mu.Unlock()
		return true
	}
	if u.waiting > 0 && u.waiting+n > a.share() {
		a.forget(tenant, u)
		a.mu.Unlock()
		return false
	}
	w := &waiter{tenant: tenant, n: n, ready: make(chan struct{})}
	a.queue = append(a.queue, w)
	a.waiting += n
	u.waiting += n
	u.waiters++
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
	u.waiting -= n
	u.waiters--
	a.forget(tenant, u)
	a.grant() // those behind w, and other tenants, may fit now
	return false
}

// grant admits waiting calls in arrival order, each that fits unless an
// earlier call of its tenant still waits. a.mu is held.
func (a *admission) grant() {
	var blocked map[string]bool
	kept := a.queue[:0]
	for _, w := range a.queue {
		u := a.tenants[w.tenant]
		if blocked[w.tenant] || !a.fits(u, w.n) {
			if blocked == nil {
				blocked = map[string]bool{}
			}
			blocked[w.tenant] = true
			kept = append(kept, w)
			continue
		}
		a.waiting -= w.n
		u.waiting -= w.n
		u.waiters--
		a.used += w.n
		u.used += w.n
		close(w.ready)
	}
	clear(a.queue[len(kept):])
	a.queue = kept
}

// release returns n bytes admit charged to the tenant of ctx's
// principal and admits who waits next.
func (a *admission) release(ctx context.Context, n int64) {
	tenant := apikey.TenantFrom(ctx)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.used -= n
	if u := a.tenants[tenant]; u != nil {
		u.used -= n
		a.forget(tenant, u)
	}
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
func (a *admission) admitWrite(ctx context.Context, n int64) error {
	wctx, cancel := context.WithTimeout(ctx, a.writeWait)
	defer cancel()
	for {
		if a.admit(wctx, n, queueWait) {
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
			return a.pushBack(n)
		}
	}
}
