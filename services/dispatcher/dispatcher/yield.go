package dispatcher

import (
	"context"
	"log/slog"
	"sync"
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
// AllowRebalance zeroes the client's count of polls, and a callback
// waits only while that count is above zero. franz-go follows a
// callback with another one within a millisecond on kfake: a
// cooperative session ends with a revoke of nothing, which is allowed
// at once, and the revoke of the partitions the next SyncGroup moved
// away comes as soon as the member has joined again. Were a poll
// counted only by the loop's next poll, that revoke would run without
// the loop whenever the loop's turn took longer than a join (1 of 3,053
// deliveries was POSTed again, under load). So each allowed callback is
// followed at once by a poll counted from a goroutine of its own
// (rearmAfter): a poll with a context already over returns at once and
// touches nothing but the count, so it is safe beside a transaction's
// End, and the client adds it only once the allowed callback has run.
//
// Every step is bounded: whatever state a commit is in, the loop yields
// at yieldHardWait (the heartbeats go on meanwhile: a commit's End is
// answered by the session's heartbeat loop, and with KIP-447 it commits
// even when the heartbeat says a rebalance is in progress). A callback
// that loses no partition (the end of a cooperative session, an
// assignment, a lost session) is allowed at once.
//
// The client zeroes its count of polls only on AllowRebalance and adds
// one per poll that returns records; the loop zeroes it itself every
// rearmPolls polls (rearmed) so that it never grows past 32 bits when no
// rebalance comes.

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
	// rearming counts the goroutines that add a poll back to the
	// client's count after an allowed callback (rearmAfter); the loop
	// waits for them before its session closes (wait).
	rearming sync.WaitGroup
}

// handOffWork is what the hand-off asks of the loop at a step: the
// partitions the window holds that the last assignment lacks, whether
// any of theirs has an attempt in flight, spilling their waiting
// deliveries, the commits begun and ended (and whether one runs),
// letting the waiting callback run, and counting a poll again once it
// has run.
type handOffWork struct {
	leaving      func() map[tp]bool
	inFlight     func(map[tp]bool) bool
	spill        func(map[tp]bool) int
	begun, ended uint64
	committing   bool
	allow        func()
	rearm        func()
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
		h.phase = yieldNone
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

// yield lets the waiting callback run, and has a poll counted again as
// soon as it has run, so that the callback franz-go may start right
// after it waits for the loop too.
func (h *handOff) yield(now time.Time, w handOffWork) {
	revokes := len(h.leaving)
	h.phase, h.since, h.leaving, h.polls = yieldYielded, now, nil, 0
	w.allow()
	w.rearm()
	w.log.Debug("a partition callback is allowed", "revokes", revokes)
}

// pollCounter is the session's poll, as rearmAfter uses it.
type pollCounter interface {
	PollRecords(ctx context.Context, maxPollRecords int) kgo.Fetches
}

// rearmAfter adds a poll to the client's count, on a goroutine of its
// own, once no partition callback runs: right after the callback the
// loop just allowed (the client counts a poll at once while its count
// is above zero; at zero, as after an allowed callback, only once no
// callback runs). The poll's context is over, so it returns
// at once without records and changes nothing but the count; the loop
// does not poll until the callback ran, and this poll may overlap a
// transaction's End (kgo's PollRecords with a context over, v1.22:
// no uncommitted offsets are read or moved for a transactional session).
func (h *handOff) rearmAfter(sess pollCounter) {
	h.rearming.Add(1)
	go func() {
		defer h.rearming.Done()
		countPoll(sess)
	}()
}

// countPoll makes a poll that returns at once (its context is over): it
// reads and moves nothing, and the client only counts it.
func countPoll(sess pollCounter) {
	over, cancel := context.WithCancel(context.Background())
	cancel()
	sess.PollRecords(over, 1)
}

// wait waits for the goroutines of rearmAfter (the loop, when it ends:
// each returns once the callbacks running when it began have, which are
// bounded). A poll counted after the session began to close would keep
// its leave from running (kgo's LeaveGroup waits for a zero count).
func (h *handOff) wait() { h.rearming.Wait() }

// rearmed is called before each poll, with the poll gate held (no
// commit ends meanwhile). The client adds one to its count of polls for
// each poll that returns records, and zeroes it only on AllowRebalance:
// every rearmPolls polls the loop zeroes it and adds one back with a
// poll that returns at once (its context is over), so that it never
// grows past the client's 32 bits.
func (h *handOff) rearmed(sess *kgo.GroupTransactSession) {
	h.polls++
	if h.polls < rearmPolls || h.blocked.Load() { // a callback waiting now is handed off first
		return
	}
	sess.AllowRebalance()
	h.polls = 0
	countPoll(sess)
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
		spill:      func(leaving map[tp]bool) int { return e.sp.spillLeaving(leaving, now) },
		begun:      e.c.begun,
		ended:      e.c.ended,
		committing: e.c.committing,
		allow:      sess.AllowRebalance,
		rearm:      func() { e.y.rearmAfter(sess) },
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
func (sp *spiller) spillLeaving(leaving map[tp]bool, now time.Time) int {
	lanes := map[*lane]bool{}
	for k := range leaving {
		pw := sp.w.parts[k]
		if pw == nil || pw.dropped {
			continue // gone since the leaving set was taken: nothing of it waits
		}
		for _, en := range pw.entries[pw.head:] {
			if en.state == entryQueued && en.lane != nil {
				lanes[en.lane] = true
			}
		}
	}
	n := 0
	for l := range lanes {
		n += l.queued
		sp.spillWaiting(l, now, "rebalance")
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
