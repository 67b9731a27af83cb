package dispatcher

import (
	"sync"
	"time"
)

// receivers holds the health of each endpoint the dispatcher serves:
// failure streaks, notices, auto-pause and outage mode (its cap and rate
// live in its lane). Deliveries are keyed by endpoint id, so exactly one
// dispatcher owns an endpoint at a time and this state is exact, not an
// estimate shared across replicas. Safe for concurrent use.
type receivers struct {
	mu sync.Mutex
	m  map[string]*receiver
	// seed, when set, gives the durable health of an endpoint whose
	// health this dispatcher does not know yet (see noticeView);
	// seedOutage says whether a failing endpoint is put in outage mode.
	seed       func(id string) (failing bool, since time.Time)
	seedOutage bool
}

type receiver struct {
	// Health, for notices and auto-pause. seeded is false until the
	// durable part has been read from the notices view.
	seeded        bool
	failures      int       // consecutive failed attempts
	permanent     int       // consecutive permanent failures
	failing       bool      // an endpoint.failing notice is out
	lastNotice    time.Time // when the last failing notice or reminder went out
	autoPausedFor bool      // auto-pause already requested

	// Outage mode: after failures of outageAfter distinct deliveries in
	// a row, one probe at a time.
	streak    []string  // distinct deliveries failed in the current streak (up to outageAfter)
	outage    bool      // in outage mode
	probing   bool      // a probe attempt is in flight
	nextProbe time.Time // no probe before this
	probes    int       // failed probes this outage
}

// gate is outage mode's decision for one delivery.
type gate int

const (
	gatePass  gate = iota // not in an outage: attempt as usual
	gateProbe             // in an outage: this delivery is the probe
	gateHold              // in an outage: hold it, no attempt
)

// outageGate decides, while endpoint id is failing, whether a delivery
// (at its attempt number) is the one probe or is held until holdUntil.
// A probe is a delivery not attempted before, so no event spends more than
// one attempt on probing.
func (rs *receivers) outageGate(id string, now time.Time, attempt uint32, recheck time.Duration) (g gate, holdUntil time.Time) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.get(id)
	if !r.outage {
		return gatePass, time.Time{}
	}
	if !r.probing && !now.Before(r.nextProbe) && attempt == 1 {
		r.probing = true
		return gateProbe, time.Time{}
	}
	until := now.Add(recheck)
	if !r.probing && r.nextProbe.After(now) && r.nextProbe.Before(until) {
		until = r.nextProbe
	}
	return gateHold, until
}

// probed records a probe's end: on failure the next waits wait (on
// success observe has already ended the outage).
func (rs *receivers) probed(id string, now time.Time, wait func(failedProbes int) time.Duration) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.get(id)
	r.probing = false
	if r.outage {
		r.probes++
		r.nextProbe = now.Add(wait(r.probes))
	}
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
func (rs *receivers) observe(id, delivery string, success, permanent bool, now time.Time, failingAfter, outageAfter, pauseAfter int, remindEvery time.Duration) healthEvent {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.get(id)
	if success {
		recovered := r.failing
		r.failures, r.permanent, r.failing, r.autoPausedFor, r.probes = 0, 0, false, false, 0
		r.streak, r.outage = r.streak[:0], false
		if recovered {
			return healthRecovered
		}
		return healthNone
	}
	if outageAfter > 0 && !r.outage && !permanent {
		if len(r.streak) == 0 || r.streak[len(r.streak)-1] != delivery {
			r.streak = append(r.streak, delivery)
		}
		if len(r.streak) >= outageAfter {
			r.outage = true
		}
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
	if !r.seeded {
		r.seeded = true
		if rs.seed != nil {
			if failing, since := rs.seed(id); failing {
				// An outage from before this dispatcher took the
				// endpoint over: its notice is out, and outage mode
				// (which starts before the notice) is on until a
				// success ends both.
				r.failing, r.lastNotice, r.outage = true, since, rs.seedOutage
			}
		}
	}
	return r
}

// forgetHealth drops what this dispatcher knows of every endpoint's
// health: after a rebalance each endpoint's health is seeded again from
// the notices view, which holds what its previous owner committed.
func (rs *receivers) forgetHealth() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	clear(rs.m)
}
