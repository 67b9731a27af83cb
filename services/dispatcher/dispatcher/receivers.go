package dispatcher

import (
	"math"
	"sync"
	"time"
)

// receivers holds what the dispatcher knows about each endpoint it
// serves: attempts in flight, the rate limiter, and whether it answers
// slowly. Deliveries are keyed by endpoint id, so exactly one dispatcher
// owns an endpoint at a time and this state is exact, not an estimate
// shared across replicas. Safe for concurrent use.
type receivers struct {
	mu sync.Mutex
	m  map[string]*receiver
}

type receiver struct {
	inFlight int
	// last is when the last attempt started; starts are at least
	// 1/rate apart, so no 1 s window holds more than rate+1.
	last time.Time
	// next is the reservation frontier: every start slot before it has
	// been handed to a deferred delivery.
	next time.Time

	// Health, for notices and auto-pause.
	failures      int       // consecutive failed attempts
	permanent     int       // consecutive permanent failures
	failing       bool      // an endpoint.failing notice is out
	lastNotice    time.Time // when the last failing notice or reminder went out
	autoPausedFor bool      // auto-pause already requested
}

// healthEvent is what an attempt's outcome means for its endpoint.
type healthEvent int

const (
	healthNone healthEvent = iota
	healthFailing
	healthReminder
	healthRecovered
	healthAutoPause
)

// observe records an attempt's outcome for endpoint id and says which
// notice, if any, it calls for: one endpoint.failing per outage (at the
// failingAfter-th consecutive failure), a reminder every remindEvery while
// it lasts, endpoint.recovered at the first success after, and an
// auto-pause at pauseAfter consecutive permanent failures.
func (rs *receivers) observe(id string, success, permanent bool, now time.Time, failingAfter, pauseAfter int, remindEvery time.Duration) healthEvent {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.get(id)
	if success {
		recovered := r.failing
		r.failures, r.permanent, r.failing, r.autoPausedFor = 0, 0, false, false
		if recovered {
			return healthRecovered
		}
		return healthNone
	}
	r.failures++
	if permanent {
		r.permanent++
	} else {
		r.permanent = 0
	}
	switch {
	case pauseAfter > 0 && r.permanent >= pauseAfter && !r.autoPausedFor:
		r.autoPausedFor = true
		return healthAutoPause
	case !r.failing && r.failures >= failingAfter:
		r.failing, r.lastNotice = true, now
		return healthFailing
	case r.failing && remindEvery > 0 && now.Sub(r.lastNotice) >= remindEvery:
		r.lastNotice = now
		return healthReminder
	}
	return healthNone
}

func newReceivers() *receivers { return &receivers{m: map[string]*receiver{}} }

func (rs *receivers) get(id string) *receiver {
	r := rs.m[id]
	if r == nil {
		r = &receiver{}
		rs.m[id] = r
	}
	return r
}

// admit takes an in-flight slot for an attempt to endpoint id now, if
// both the concurrency cap and the rate limit (perSecond; 0 is none)
// allow it. When they do not, it takes no slot and returns when to try
// again. A rate-limited attempt is given a reserved start time, spaced
// 1/perSecond after the previous one, and passes it back as reserved when
// it returns, so deferred deliveries neither exceed the rate nor starve.
func (rs *receivers) admit(id string, now time.Time, maxInFlight int, perSecond float64, capRetry time.Duration, reserved time.Time) (ok bool, retryAt time.Time, why string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.get(id)
	if r.inFlight >= maxInFlight {
		return false, now.Add(capRetry), "concurrency cap"
	}
	if perSecond > 0 {
		interval := time.Duration(math.Ceil(float64(time.Second) / perSecond))
		earliest := r.last.Add(interval)
		if !reserved.IsZero() && !now.Before(reserved) {
			// It holds a slot already: it only waits for the spacing.
			if now.Before(earliest) {
				return false, earliest, "rate limit"
			}
		} else if now.Before(earliest) || r.next.After(now) {
			slot := r.next
			if slot.Before(earliest) {
				slot = earliest
			}
			r.next = slot.Add(interval)
			return false, slot, "rate limit"
		} else {
			r.next = now.Add(interval)
		}
		r.last = now
	}
	r.inFlight++
	return true, time.Time{}, ""
}

// done returns the slot admit took.
func (rs *receivers) done(id string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r := rs.m[id]; r != nil && r.inFlight > 0 {
		r.inFlight--
	}
}
