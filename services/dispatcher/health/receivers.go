package health

import (
	"fmt"
	"sync"
	"time"
)

// Receivers holds the health of each endpoint the dispatcher serves:
// failure streaks, notices, auto-pause and outage mode (its cap and rate
// live in its lane, in the dispatcher). Deliveries are keyed by endpoint
// id, so exactly one dispatcher owns an endpoint at a time and this state
// is exact, not an estimate shared across replicas. Safe for concurrent
// use.
type Receivers struct {
	mu sync.Mutex
	m  map[string]*receiver
	// seed, when set, gives the durable health of an endpoint whose
	// health this dispatcher does not know yet (see NoticeView);
	// seedOutage says whether a failing endpoint is put in outage mode.
	seed       Seed
	seedOutage bool
}

// Seed gives the durable health of endpoint id: whether its
// endpoint.failing notice is out, since when (its last notice or
// reminder), and whether that notice was written in outage mode.
// NoticeView.Lookup is one.
type Seed func(id string) (failing bool, since time.Time, outage bool)

// New returns the health of no endpoint yet. seed, when not nil, gives
// the durable health of an endpoint whose health these Receivers do not
// know yet (on its first use, and again after Forget or Reset): a
// failure streak from before this dispatcher took the endpoint over.
// seedOutage says whether a seeded failing endpoint whose notice was
// written in outage mode is put in outage mode (the dispatcher's
// --outage-after is not 0).
func New(seed Seed, seedOutage bool) *Receivers {
	return &Receivers{m: map[string]*receiver{}, seed: seed, seedOutage: seedOutage}
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
	// version is the newest endpoint version an attempt's outcome was
	// observed for, pausedFrom the one the automatic pause was written
	// from: an outcome of a newer version than that means the endpoint
	// changed after its pause (an operator resumed it), so its streak
	// starts again (Changed).
	version, pausedFrom uint64
	// partition is the deliveries partition the endpoint's attempts came
	// from (-1: not known yet): after a rebalance only the endpoints of
	// newly assigned partitions are seeded again.
	partition int32

	// Outage mode: after failures of Thresholds.OutageAfter distinct
	// deliveries in a row, one probe at a time.
	streak    []string  // distinct deliveries failed in the current streak (up to OutageAfter)
	outage    bool      // in outage mode
	probing   bool      // a probe attempt is in flight
	nextProbe time.Time // no probe before this
	probes    int       // failed probes this outage
}

func newReceiver() *receiver { return &receiver{partition: -1} }

// Gate is outage mode's decision for one delivery.
type Gate int

const (
	Pass  Gate = iota // not in an outage: attempt as usual
	Probe             // in an outage: this delivery is the probe
	Hold              // in an outage: hold it, no attempt
)

// OutageGate decides, while endpoint id is failing, whether a delivery
// is the one probe or is held until holdUntil. A preferred delivery (one
// not attempted before, or an ordered lane's head: its followers cannot
// probe before it ends) may probe as soon as the probe is due, so that
// no event spends more than one attempt on probing; but an outage always
// has a probe: when no first attempt has come along within one recheck
// of the probe falling due (the endpoint's pending deliveries are all
// retries or recoveries), the next delivery to come back probes,
// whatever its attempt number. Held deliveries come back in the order
// they were held, so that is the one held longest.
func (rs *Receivers) OutageGate(id string, now time.Time, preferred bool, recheck time.Duration) (g Gate, holdUntil time.Time) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.get(id)
	if !r.outage {
		return Pass, time.Time{}
	}
	if r.nextProbe.IsZero() {
		r.nextProbe = now // an outage seeded from the notices view
	}
	anyAt := r.nextProbe.Add(recheck) // from then on any delivery may probe
	if !r.probing && !now.Before(r.nextProbe) && (preferred || !now.Before(anyAt)) {
		r.probing = true
		return Probe, time.Time{}
	}
	until := now.Add(recheck)
	if !r.probing {
		for _, at := range []time.Time{r.nextProbe, anyAt} {
			if at.After(now) && at.Before(until) {
				until = at
				break
			}
		}
	}
	return Hold, until
}

// ProbeTurn is the one probe outage mode let through for an endpoint.
// Whoever the gate gave it to ends it, once, on every way out of the
// delivery's handling (the dispatcher's handler.attemptRecord and
// handler.handle: deferred around it, so a set-aside, a hold, a panic or
// an interruption ends it as a result does). Only the goroutine handling
// the delivery uses it.
type ProbeTurn struct {
	rs   *Receivers
	id   string
	at   time.Time               // when the probe's attempt ended (zero: no attempt was made)
	wait func(int) time.Duration // the wait before the next probe after a failed one
	done bool
}

// Turn returns endpoint id's probe turn, which the gate has just granted.
func (rs *Receivers) Turn(id string) *ProbeTurn { return &ProbeTurn{rs: rs, id: id} }

// Attempted notes that the probe's attempt ended at (with an outcome):
// if it failed, the next probe waits wait(failed probes so far).
func (p *ProbeTurn) Attempted(at time.Time, wait func(failedProbes int) time.Duration) {
	if p != nil {
		p.at, p.wait = at, wait
	}
}

// Over ends the probe at now, unless it already ended. A probe that
// made no attempt (set aside, held, interrupted, a worker fault) lets
// the next delivery probe at once.
func (p *ProbeTurn) Over(now time.Time) {
	if p == nil || p.done {
		return
	}
	p.done = true
	if p.wait == nil {
		p.at, p.wait = now, func(int) time.Duration { return 0 }
	}
	p.rs.probed(p.id, p.at, p.wait)
}

// probed records a probe's end: on failure the next waits wait (on
// success Observe has already ended the outage). Only ProbeTurn.Over
// calls it.
func (rs *Receivers) probed(id string, now time.Time, wait func(failedProbes int) time.Duration) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.get(id)
	r.probing = false
	if r.outage {
		r.probes++
		r.nextProbe = now.Add(wait(r.probes))
	}
}

// Event is what an attempt's outcome means for its endpoint.
type Event int

const (
	None      Event = iota // nothing to tell
	Failing                // the endpoint.failing notice: an outage began
	Reminder               // an endpoint.failing reminder: it goes on
	Recovered              // the endpoint.recovered notice: it ended
	AutoPause              // pause the endpoint automatically (R-RECV-4)
)

// Thresholds are when an endpoint's failures call for something: the
// dispatcher's --failing-after, --outage-after, --auto-pause-after and
// --remind-every (OutageAfter 0 for an endpoint that opted out of
// outage mode).
type Thresholds struct {
	FailingAfter   int           // consecutive failed attempts for the endpoint.failing notice
	OutageAfter    int           // distinct deliveries failed transiently in a row for outage mode (0: never)
	AutoPauseAfter int           // consecutive permanent failures for an automatic pause (0: never)
	RemindEvery    time.Duration // between reminders while the outage lasts (0: never)
}

// Observe records an attempt's outcome for endpoint id and says which
// notice, if any, it calls for: one endpoint.failing per outage (at the
// th.FailingAfter-th consecutive failure), a reminder every
// th.RemindEvery while it lasts, endpoint.recovered at the first success
// after, and an auto-pause at th.AutoPauseAfter consecutive permanent
// failures.
func (rs *Receivers) Observe(id, delivery string, success, permanent bool, now time.Time, th Thresholds) Event {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.get(id)
	if success {
		recovered := r.failing
		r.failures, r.permanent, r.failing, r.autoPausedFor, r.probes = 0, 0, false, false, 0
		r.streak, r.outage = r.streak[:0], false
		if recovered {
			return Recovered
		}
		return None
	}
	if th.OutageAfter > 0 && !r.outage && !permanent {
		if len(r.streak) == 0 || r.streak[len(r.streak)-1] != delivery {
			r.streak = append(r.streak, delivery)
		}
		if len(r.streak) >= th.OutageAfter {
			r.outage, r.nextProbe = true, now
		}
	}
	r.failures++
	if permanent {
		r.permanent++
	} else {
		r.permanent = 0
	}
	switch {
	case th.AutoPauseAfter > 0 && r.permanent >= th.AutoPauseAfter && !r.autoPausedFor:
		r.autoPausedFor, r.pausedFrom = true, r.version
		return AutoPause
	case !r.failing && r.failures >= th.FailingAfter:
		r.failing, r.lastNotice = true, now
		return Failing
	case r.failing && th.RemindEvery > 0 && now.Sub(r.lastNotice) >= th.RemindEvery:
		r.lastNotice = now
		return Reminder
	}
	return None
}

func (rs *Receivers) get(id string) *receiver {
	r := rs.m[id]
	if r == nil {
		r = newReceiver()
		rs.m[id] = r
	}
	if !r.seeded {
		r.seeded = true
		if rs.seed != nil {
			if failing, since, outage := rs.seed(id); failing {
				// A failure streak from before this dispatcher took
				// the endpoint over: its notice is out, and outage
				// mode is on (until a success ends both) if the
				// notice was written in it — transient failures
				// (with the defaults it starts before the notice; a
				// notice from before it began, or from an older
				// dispatcher, seeds none: --outage-after transient
				// failures start it again).
				r.failing, r.lastNotice, r.outage = true, since, rs.seedOutage && outage
			}
		}
	}
	return r
}

// Forget drops what this dispatcher knows of the health of the endpoints
// whose deliveries come from partitions (and of those whose partition it
// does not know yet): after a partition is assigned, each of its
// endpoints' health is seeded again from the notices view, which holds
// what its previous owner committed; after one is revoked, it is no
// longer this dispatcher's to keep. Endpoints of other partitions keep
// theirs. A probe in flight is not forgotten: its endpoint gets fresh,
// unseeded state that still knows the probe is out, so no second probe
// starts before it ends.
func (rs *Receivers) Forget(partitions map[int32]bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for id, r := range rs.m {
		if r.partition >= 0 && !partitions[r.partition] {
			continue
		}
		if r.probing {
			fresh := newReceiver()
			fresh.partition, fresh.probing = r.partition, true
			rs.m[id] = fresh
			continue
		}
		delete(rs.m, id)
	}
}

// Reset forgets the health of every endpoint, as a fresh process knows
// none: each is seeded again from the notices view when next used. Only
// when no attempt is in flight (a new session: the dispatcher's
// freshSession).
func (rs *Receivers) Reset() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	clear(rs.m)
}

// Home notes that endpoint id's deliveries come from partition.
func (rs *Receivers) Home(id string, partition int32) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.get(id).partition = partition
}

// Prune forgets the endpoints gone says are gone (deleted), unless a
// probe of theirs is in flight.
func (rs *Receivers) Prune(gone func(id string) bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for id, r := range rs.m {
		if !r.probing && gone(id) {
			delete(rs.m, id)
		}
	}
}

// Changed notes that an attempt of endpoint id ran with the endpoint at
// version v. An endpoint paused automatically and attempted at a newer
// version than its pause was written from was changed since — resumed:
// it may be paused again, by a streak of permanent failures counted from
// zero (R-RECV-4). Attempts in flight when the pause was written carry
// the version it was written from and change nothing.
func (rs *Receivers) Changed(id string, v uint64) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.get(id)
	if r.autoPausedFor && v > r.pausedFrom {
		r.autoPausedFor, r.permanent = false, 0
	}
	r.version = max(r.version, v)
}

// Pausing reports whether endpoint id, at version v in the view, has an
// automatic pause pending: requested from v (or later), not yet read by
// the view, nor re-armed (dropped, aborted or lost).
func (rs *Receivers) Pausing(id string, v uint64) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.m[id]
	return r != nil && r.autoPausedFor && v <= r.pausedFrom
}

// InOutage reports whether endpoint id is in outage mode.
func (rs *Receivers) InOutage(id string) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.m[id]
	return r != nil && r.outage
}

// Rearm lets endpoint id be paused automatically again: its last
// automatic pause did not take effect (its transaction aborted, or a
// concurrent change of the endpoint came first in the log). The next
// permanent failure of its streak pauses it from the state it has then.
func (rs *Receivers) Rearm(id string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r := rs.m[id]; r != nil {
		r.autoPausedFor = false
	}
}

// Len is the number of endpoints whose health is kept.
func (rs *Receivers) Len() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return len(rs.m)
}

// Describe is endpoint id's health and outage state, for a state dump.
func (rs *Receivers) Describe(id string, now time.Time) string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.m[id]
	if r == nil {
		return "no receiver state"
	}
	return fmt.Sprintf("failures %d, outage %v, probing %v, next probe in %v, failed probes %d",
		r.failures, r.outage, r.probing, r.nextProbe.Sub(now).Round(time.Millisecond), r.probes)
}
