package dispatcher

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A rebalance that moves partitions away re-POSTs nothing they completed
// (docs/DESIGN.md, "What a crash, a rebalance or an outage re-POSTs", "A
// join"; invariant I44).
//
// The group's cooperative-sticky protocol takes a partition from its
// owner in two rebalances: the first assigns the owner its partitions
// less the moving ones, the owner revokes those (the "prerevoke" at the
// start of its next session) and rejoins, and the second hands them to
// their new owner, which reads them from their committed offset. What
// the owner completed and did not commit before the revoke is POSTed
// again by the new owner, and so is what it had in flight.
//
// So the session blocks rebalances on poll (kgo.BlockRebalanceOnPoll):
// every partition callback waits until the loop allows it, and
// kgo.OnPartitionsCallbackBlocked tells the loop one waits. The loop
// then looks at the assignment the last SyncGroup gave this member
// (syncedBalancer): when it lacks partitions the window holds, the
// callback is their revoke, and the loop yields only once their work is
// committed:
//
//  1. draining: no attempt starts and nothing is polled; every delivery
//     waiting in a lane of a leaving partition is spilled (as a graceful
//     drain does: drain.go), so that the watermark can pass it; the
//     leaving partitions' attempts in flight end, for at most
//     yieldDrainWait;
//  2. committing: one commit that begins after the drain ends (forced,
//     whatever --commit-interval says) carries their work;
//  3. yielded: AllowRebalance lets the callback run; nothing is polled
//     until a partition callback ran (a poll would wait inside the
//     client for the callback, and the loop with it).
//
// Every step is bounded: whatever state a commit is in, the loop yields
// at yieldHardWait (the heartbeats go on meanwhile: a commit's End is
// answered by the session's heartbeat loop, and with KIP-447 it commits
// even when the heartbeat says a rebalance is in progress). A callback
// that loses no partition (the end of a cooperative session, an
// assignment, a lost session) is allowed at once.
//
// The client zeroes its count of polls only on AllowRebalance and adds
// one per poll that returns records; re-arm keeps it from growing for
// ever when no rebalance comes.

// yieldDrainWait bounds how long a leaving partition's attempts in
// flight are waited for before its work is committed without them (an
// attempt still in flight then is cancelled by the revoke and may be
// POSTed again by the next owner).
const yieldDrainWait = 2 * time.Second

// yieldHardWait bounds the whole hand-off: the callback is allowed then
// whatever a commit is doing (it is far below the group's rebalance
// timeout).
const yieldHardWait = 5 * time.Second

// yieldCallbackWait bounds how long the loop stops polling after it
// allowed a callback that it never hears of (a path of the client that
// calls none).
const yieldCallbackWait = 5 * time.Second

// rearmPolls is how many polls the loop makes between re-arms of the
// client's poll count (far below its 32-bit limit).
const rearmPolls = 1 << 20

type yieldPhase uint8

const (
	yieldNone       yieldPhase = iota
	yieldDraining              // a revoke waits: no attempt starts; the leaving partitions' attempts end
	yieldCommitting            // one commit begun after the drain carries their work
	yieldYielded               // the callback was allowed; no poll until it ran
)

// rebalanceYield is the loop's state of a rebalance hand-off. blocked
// and ran are set by the client's goroutines; the rest is the loop's.
type rebalanceYield struct {
	blocked atomic.Bool // a partition callback waits for AllowRebalance
	ran     atomic.Bool // a partition callback ran
	synced  *syncedBalancer

	phase   yieldPhase
	since   time.Time   // when the callback began to wait (draining, committing), or was allowed (yielded)
	leaving map[tp]bool // the partitions the waiting callback revokes
	// need is the number of commits that must have ended before the
	// hand-off yields: the one begun after the drain.
	need  uint64
	polls int
	// rearm is set once an allowed callback ran: the loop's next poll
	// first adds one back to the client's count (rearmed).
	rearm bool
}

// callbackBlocked is the client's OnPartitionsCallbackBlocked (on a
// goroutine of the client's).
func (e *engine) callbackBlocked() {
	e.y.blocked.Store(true)
	e.in.wake()
}

// callbackRan is told by every partition callback once it is done.
func (e *engine) callbackRan() {
	e.y.ran.Store(true)
	e.in.wake()
}

// attemptsHeld reports whether a hand-off keeps attempts from starting.
func (e *engine) attemptsHeld() bool {
	return e.y.phase == yieldDraining || e.y.phase == yieldCommitting
}

// pollHeld reports whether a hand-off keeps the loop from polling.
func (e *engine) pollHeld() bool { return e.y.phase != yieldNone }

// commitForced reports whether the hand-off wants a commit now.
func (e *engine) commitForced() bool {
	return e.y.phase == yieldCommitting && e.commitsBegun < e.y.need
}

// yieldStep moves the hand-off on (the loop, each turn).
func (e *engine) yieldStep(sess *kgo.GroupTransactSession, now time.Time) {
	y := &e.y
	if y.phase == yieldYielded && (y.ran.Swap(false) || now.Sub(y.since) >= yieldCallbackWait) {
		y.phase, y.rearm = yieldNone, true
	}
	if y.phase == yieldNone && y.blocked.Swap(false) {
		y.ran.Store(false)
		leaving := e.leavingParts()
		e.s.log.Debug("a partition callback waits for the loop", "leaving", len(leaving))
		if len(leaving) == 0 {
			e.yieldNow(sess, now)
			return
		}
		y.phase, y.since, y.leaving = yieldDraining, now, leaving
		n := e.spillLeaving(leaving, now)
		e.s.log.Info("a rebalance moves partitions away: their attempts end and their work is committed before they go",
			"partitions", len(leaving), "deferred", n)
	}
	switch y.phase {
	case yieldDraining:
		inFlight := e.inFlightIn(y.leaving)
		if !inFlight || now.Sub(y.since) >= yieldDrainWait {
			if inFlight {
				e.s.log.Warn("a rebalance hand-off stopped waiting for the leaving partitions' attempts; the next owner attempts them again",
					"waited", now.Sub(y.since).Round(time.Millisecond))
			}
			y.phase, y.need = yieldCommitting, e.commitsBegun+1
		}
	case yieldCommitting:
		landed := e.commitsEnded >= y.need && !e.committing
		if landed || now.Sub(y.since) >= yieldHardWait {
			if !landed {
				e.s.log.Warn("a rebalance hand-off yielded before its commit ended; what the leaving partitions completed since the last commit is attempted again by their next owner",
					"waited", now.Sub(y.since).Round(time.Millisecond), "committing", e.committing)
			}
			e.yieldNow(sess, now)
		}
	}
}

// yieldNow lets the waiting callback run.
func (e *engine) yieldNow(sess *kgo.GroupTransactSession, now time.Time) {
	e.y.phase, e.y.since, e.y.leaving, e.y.polls = yieldYielded, now, nil, 0
	sess.AllowRebalance()
}

// rearmed is called before each poll, with the poll gate held (no
// commit ends meanwhile). After an allowed callback ran, the client
// counts no poll, and a poll adds itself to the count only once it has
// records to return: the next callback (the revoke of the partitions a
// SyncGroup moved away comes right after the end of a cooperative
// session) would not wait for the loop. So one is added back at once
// with a poll that returns at once (its context is over). Every
// rearmPolls polls the count is zeroed and one added back the same way,
// so that it never grows past the client's 32 bits.
func (e *engine) rearmed(sess *kgo.GroupTransactSession) {
	e.y.polls++
	switch {
	case e.y.rearm:
	case e.y.polls >= rearmPolls && !e.y.blocked.Load(): // a callback waiting now is handed off first
		sess.AllowRebalance()
	default:
		return
	}
	e.y.polls, e.y.rearm = 0, false
	over, cancel := context.WithCancel(context.Background())
	cancel()
	sess.PollRecords(over, 1)
}

// leavingParts are the partitions the window holds that the last
// assignment of this member lacks: the ones a waiting callback revokes.
func (e *engine) leavingParts() map[tp]bool {
	assigned, ok := e.y.synced.last()
	if !ok {
		return nil
	}
	var out map[tp]bool
	for k, pw := range e.w.parts {
		if pw.dropped || assigned[k] {
			continue
		}
		if out == nil {
			out = map[tp]bool{}
		}
		out[k] = true
	}
	return out
}

// spillLeaving spills every delivery waiting in a lane of a leaving
// partition (a lane is one endpoint's, and an endpoint's deliveries are
// in one partition).
func (e *engine) spillLeaving(leaving map[tp]bool, now time.Time) int {
	lanes := map[*lane]bool{}
	for k := range leaving {
		pw := e.w.parts[k]
		for _, en := range pw.entries[pw.head:] {
			if en.state == entryQueued && en.lane != nil {
				lanes[en.lane] = true
			}
		}
	}
	n := 0
	for l := range lanes {
		n += l.queued
		e.spillWaiting(l, now, "rebalance")
	}
	return n
}

// inFlightIn reports whether a leaving partition has an attempt in flight.
func (e *engine) inFlightIn(leaving map[tp]bool) bool {
	for k := range leaving {
		pw := e.w.parts[k]
		if pw == nil || pw.dropped {
			continue
		}
		for _, en := range pw.entries[pw.head:] {
			if en.state == entryInFlight {
				return true
			}
		}
	}
	return false
}

// yieldDeadline is when the hand-off moves on by itself (zero: never).
func (e *engine) yieldDeadline() time.Time {
	switch e.y.phase {
	case yieldDraining:
		return e.y.since.Add(yieldDrainWait)
	case yieldCommitting:
		return e.y.since.Add(yieldHardWait)
	case yieldYielded:
		return e.y.since.Add(yieldCallbackWait)
	}
	return time.Time{}
}
