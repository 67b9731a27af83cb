package dispatcher

import (
	"context"
	"log/slog"
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

// handOff is the state machine of a rebalance hand-off. It decides; the
// loop acts (handOffWork). blocked and ran are set by the client's
// goroutines; the rest is the loop's.
type handOff struct {
	blocked atomic.Bool // a partition callback waits for AllowRebalance
	ran     atomic.Bool // a partition callback ran
	synced  *syncedBalancer
	wake    func() // wakes the loop (its inbox)

	phase   yieldPhase
	since   time.Time   // when the callback began to wait (draining, committing), or was allowed (yielded)
	leaving map[tp]bool // the partitions the waiting callback revokes
	// need is the number of commits that must have begun (and ended)
	// before the hand-off yields: the one begun after the drain.
	need  uint64
	polls int
	// rearm is set once an allowed callback ran: the loop's next poll
	// first adds one back to the client's count (rearmed).
	rearm bool
}

// handOffWork is what the hand-off asks of the loop at a step: the
// partitions the window holds that the last assignment lacks, whether
// any of theirs has an attempt in flight, spilling their waiting
// deliveries, the commits begun and ended (and whether one runs), and
// letting the waiting callback run.
type handOffWork struct {
	leaving      func() map[tp]bool
	inFlight     func(map[tp]bool) bool
	spill        func(map[tp]bool) int
	begun, ended uint64
	committing   bool
	allow        func()
	log          *slog.Logger
}

// callbackBlocked is the client's OnPartitionsCallbackBlocked (on a
// goroutine of the client's).
func (h *handOff) callbackBlocked() {
	h.blocked.Store(true)
	h.wake()
}

// callbackRan is told by every partition callback once it is done.
func (h *handOff) callbackRan() {
	h.ran.Store(true)
	h.wake()
}

// attemptsHeld reports whether the hand-off keeps attempts from starting.
func (h *handOff) attemptsHeld() bool {
	return h.phase == yieldDraining || h.phase == yieldCommitting
}

// pollHeld reports whether the hand-off keeps the loop from polling.
func (h *handOff) pollHeld() bool { return h.phase != yieldNone }

// commitForced reports whether the hand-off wants a commit now, begun
// the commits begun so far.
func (h *handOff) commitForced(begun uint64) bool {
	return h.phase == yieldCommitting && begun < h.need
}

// active reports whether the hand-off has a step to take: a callback
// waits, or one is being handed off.
func (h *handOff) active() bool { return h.phase != yieldNone || h.blocked.Load() }

// step moves the hand-off on (the loop, each turn it is active).
func (h *handOff) step(now time.Time, w handOffWork) {
	if h.phase == yieldYielded && (h.ran.Swap(false) || now.Sub(h.since) >= yieldCallbackWait) {
		h.phase, h.rearm = yieldNone, true
	}
	if h.phase == yieldNone && h.blocked.Swap(false) {
		h.ran.Store(false)
		leaving := w.leaving()
		w.log.Debug("a partition callback waits for the loop", "leaving", len(leaving))
		if len(leaving) == 0 {
			h.yield(now, w)
			return
		}
		h.phase, h.since, h.leaving = yieldDraining, now, leaving
		n := w.spill(leaving)
		w.log.Info("a rebalance moves partitions away: their attempts end and their work is committed before they go",
			"partitions", len(leaving), "deferred", n)
	}
	switch h.phase {
	case yieldDraining:
		inFlight := w.inFlight(h.leaving)
		if !inFlight || now.Sub(h.since) >= yieldDrainWait {
			if inFlight {
				w.log.Warn("a rebalance hand-off stopped waiting for the leaving partitions' attempts; the next owner attempts them again",
					"waited", now.Sub(h.since).Round(time.Millisecond))
			}
			h.phase, h.need = yieldCommitting, w.begun+1
		}
	case yieldCommitting:
		landed := w.ended >= h.need && !w.committing
		if landed || now.Sub(h.since) >= yieldHardWait {
			if !landed {
				w.log.Warn("a rebalance hand-off yielded before its commit ended; what the leaving partitions completed since the last commit is attempted again by their next owner",
					"waited", now.Sub(h.since).Round(time.Millisecond), "committing", w.committing)
			}
			h.yield(now, w)
		}
	}
}

// yield lets the waiting callback run.
func (h *handOff) yield(now time.Time, w handOffWork) {
	h.phase, h.since, h.leaving, h.polls = yieldYielded, now, nil, 0
	w.allow()
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
func (h *handOff) rearmed(sess *kgo.GroupTransactSession) {
	h.polls++
	switch {
	case h.rearm:
	case h.polls >= rearmPolls && !h.blocked.Load(): // a callback waiting now is handed off first
		sess.AllowRebalance()
	default:
		return
	}
	h.polls, h.rearm = 0, false
	over, cancel := context.WithCancel(context.Background())
	cancel()
	sess.PollRecords(over, 1)
}

// deadline is when the hand-off moves on by itself (zero: never).
func (h *handOff) deadline() time.Time {
	switch h.phase {
	case yieldDraining:
		return h.since.Add(yieldDrainWait)
	case yieldCommitting:
		return h.since.Add(yieldHardWait)
	case yieldYielded:
		return h.since.Add(yieldCallbackWait)
	}
	return time.Time{}
}

// handOffWork is the loop's side of a hand-off step: its window, its
// lanes, its commits and its session.
func (e *engine) handOffWork(sess *kgo.GroupTransactSession, now time.Time) handOffWork {
	return handOffWork{
		leaving: func() map[tp]bool {
			assigned, ok := e.y.synced.last()
			if !ok {
				return nil
			}
			return e.w.leaving(assigned)
		},
		inFlight:   e.w.inFlightIn,
		spill:      func(leaving map[tp]bool) int { return e.spillLeaving(leaving, now) },
		begun:      e.commitsBegun,
		ended:      e.commitsEnded,
		committing: e.committing,
		allow:      sess.AllowRebalance,
		log:        e.s.log,
	}
}

// leaving are the partitions the window holds that assigned (the last
// assignment of this member) lacks: the ones a waiting callback revokes.
func (w *window) leaving(assigned map[tp]bool) map[tp]bool {
	var out map[tp]bool
	for k, pw := range w.parts {
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
func (w *window) inFlightIn(leaving map[tp]bool) bool {
	for k := range leaving {
		pw := w.parts[k]
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
