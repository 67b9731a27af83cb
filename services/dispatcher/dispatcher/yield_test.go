package dispatcher

import (
	"io"
	"log/slog"
	"testing"
	"time"
)

// handOffFake is the loop's side of a hand-off, by hand.
type handOffFake struct {
	leaving      map[tp]bool
	inFlight     bool
	spilled      []map[tp]bool
	begun, ended uint64
	committing   bool
	allowed      int
	rearmed      int
}

func (f *handOffFake) work() handOffWork {
	return handOffWork{
		leaving:    func() map[tp]bool { return f.leaving },
		inFlight:   func(map[tp]bool) bool { return f.inFlight },
		spill:      func(l map[tp]bool) int { f.spilled = append(f.spilled, l); return len(l) },
		begun:      f.begun,
		ended:      f.ended,
		committing: f.committing,
		allow:      func() { f.allowed++ },
		rearm:      func() { f.rearmed++ },
		log:        slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

func newHandOff() *handOff { return &handOff{wake: func() {}} }

// TestAHandOffThatRevokesNothingYieldsAtOnce: a callback that takes no
// partition of the window away (an assignment, the end of a cooperative
// session) is allowed in the step that sees it, and a poll is counted
// again at once (rearmAfter: the callback franz-go may start right after
// it waits for the loop too); polls stay held until it ran (or
// yieldCallbackWait passed).
func TestAHandOffThatRevokesNothingYieldsAtOnce(t *testing.T) {
	h, f, t0 := newHandOff(), &handOffFake{}, time.Unix(1000, 0)
	if h.active() {
		t.Fatal("active with no callback waiting")
	}
	h.callbackBlocked()
	if !h.active() {
		t.Fatal("not active with a callback waiting")
	}
	h.step(t0, f.work())
	if f.allowed != 1 || f.rearmed != 1 || h.phase != yieldYielded || !h.pollHeld() || h.attemptsHeld() {
		t.Fatalf("allowed %d, re-armed %d, phase %v, poll held %v, attempts held %v; want allowed and re-armed once, yielded, polls held, attempts not", f.allowed, f.rearmed, h.phase, h.pollHeld(), h.attemptsHeld())
	}
	if got := h.deadline(); !got.Equal(t0.Add(yieldCallbackWait)) {
		t.Fatalf("deadline %v, want %v", got, t0.Add(yieldCallbackWait))
	}
	h.step(t0.Add(time.Millisecond), f.work()) // the callback has not run yet
	if h.phase != yieldYielded {
		t.Fatalf("phase %v before the callback ran, want yielded", h.phase)
	}
	h.callbackRan()
	h.step(t0.Add(2*time.Millisecond), f.work())
	if h.phase != yieldNone || h.pollHeld() || h.active() {
		t.Fatalf("after the callback ran: phase %v, poll held %v, active %v", h.phase, h.pollHeld(), h.active())
	}
	// A callback the client never reports running releases the polls
	// after yieldCallbackWait.
	h.callbackBlocked()
	h.step(t0.Add(time.Second), f.work())
	h.step(t0.Add(time.Second+yieldCallbackWait), f.work())
	if h.phase != yieldNone || f.allowed != 2 || f.rearmed != 2 {
		t.Fatalf("a callback never reported: phase %v, allowed %d, re-armed %d", h.phase, f.allowed, f.rearmed)
	}
}

// TestARevokeYieldsOnlyOnceACommitBegunAfterItsDrainEnded (I44): the
// leaving partitions' waiting deliveries are spilled at once; no attempt
// starts and nothing is polled while their attempts in flight end; then
// one commit, begun after that (a commit running since before does not
// count), must have ended before the callback is allowed.
func TestARevokeYieldsOnlyOnceACommitBegunAfterItsDrainEnded(t *testing.T) {
	h, t0 := newHandOff(), time.Unix(1000, 0)
	leaving := map[tp]bool{{"d", 1}: true}
	f := &handOffFake{leaving: leaving, inFlight: true, begun: 4, ended: 3, committing: true}
	h.callbackBlocked()
	h.step(t0, f.work())
	if h.phase != yieldDraining || !h.attemptsHeld() || !h.pollHeld() || len(f.spilled) != 1 || !f.spilled[0][tp{"d", 1}] {
		t.Fatalf("phase %v, attempts held %v, poll held %v, spilled %v: want draining, both held, partition 1 spilled", h.phase, h.attemptsHeld(), h.pollHeld(), f.spilled)
	}
	if h.commitForced(f.begun) {
		t.Fatal("a commit forced while attempts drain")
	}
	// The commit running since before the drain ends meanwhile: it
	// carries none of the drained work.
	f.ended, f.committing = 4, false
	h.step(t0.Add(100*time.Millisecond), f.work())
	if h.phase != yieldDraining {
		t.Fatalf("phase %v with an attempt in flight, want draining", h.phase)
	}
	f.inFlight = false
	h.step(t0.Add(200*time.Millisecond), f.work())
	if h.phase != yieldCommitting || !h.commitForced(f.begun) || f.allowed != 0 {
		t.Fatalf("drained: phase %v, commit forced %v, allowed %d; want committing, forced, not allowed", h.phase, h.commitForced(f.begun), f.allowed)
	}
	f.begun, f.committing = 5, true // the forced commit begins
	h.step(t0.Add(210*time.Millisecond), f.work())
	if h.commitForced(f.begun) || f.allowed != 0 {
		t.Fatalf("commit begun: forced %v, allowed %d; want neither", h.commitForced(f.begun), f.allowed)
	}
	f.ended, f.committing = 5, false // it ends
	h.step(t0.Add(300*time.Millisecond), f.work())
	if f.allowed != 1 || h.phase != yieldYielded || h.attemptsHeld() {
		t.Fatalf("commit ended: allowed %d, phase %v, attempts held %v; want allowed, yielded, attempts free", f.allowed, h.phase, h.attemptsHeld())
	}
}

// TestEveryStepOfAHandOffIsBounded: attempts that never end are waited
// for yieldDrainWait, a commit that never ends yieldHardWait from the
// callback's wait: the callback is allowed whatever the commit does.
func TestEveryStepOfAHandOffIsBounded(t *testing.T) {
	h, t0 := newHandOff(), time.Unix(1000, 0)
	f := &handOffFake{leaving: map[tp]bool{{"d", 0}: true}, inFlight: true}
	h.callbackBlocked()
	h.step(t0, f.work())
	if got := h.deadline(); !got.Equal(t0.Add(yieldDrainWait)) {
		t.Fatalf("draining deadline %v, want %v", got, t0.Add(yieldDrainWait))
	}
	h.step(t0.Add(yieldDrainWait), f.work())
	if h.phase != yieldCommitting {
		t.Fatalf("phase %v after the drain's bound, want committing", h.phase)
	}
	if got := h.deadline(); !got.Equal(t0.Add(yieldHardWait)) {
		t.Fatalf("committing deadline %v, want %v (from the callback's wait)", got, t0.Add(yieldHardWait))
	}
	f.begun, f.committing = 1, true // begun, never ends
	h.step(t0.Add(yieldHardWait-time.Millisecond), f.work())
	if f.allowed != 0 {
		t.Fatal("allowed before the hard bound with the commit running")
	}
	h.step(t0.Add(yieldHardWait), f.work())
	if f.allowed != 1 || h.phase != yieldYielded {
		t.Fatalf("at the hard bound: allowed %d, phase %v; want allowed, yielded", f.allowed, h.phase)
	}
}

// TestTheWindowKnowsWhichPartitionsLeaveAndWhetherTheirAttemptsRun: the
// window's partitions the last assignment lacks leave (a dropped one is
// gone already), and an attempt in flight is seen only in those.
func TestTheWindowKnowsWhichPartitionsLeaveAndWhetherTheirAttemptsRun(t *testing.T) {
	w := newWindow(100, 1<<20)
	stay, leave, gone := tp{"d", 0}, tp{"d", 1}, tp{"d", 2}
	w.parts = map[tp]*partWindow{
		stay:  {entries: []*entry{{state: entryInFlight}}},
		leave: {entries: []*entry{{state: entryQueued}}},
		gone:  {dropped: true},
	}
	got := w.leaving(map[tp]bool{stay: true})
	if len(got) != 1 || !got[leave] {
		t.Fatalf("leaving %v, want only %v", got, leave)
	}
	if w.inFlightIn(got) {
		t.Fatal("an attempt in flight seen in a leaving partition that has none")
	}
	w.parts[leave].entries[0].state = entryInFlight
	if !w.inFlightIn(got) {
		t.Fatal("the leaving partition's attempt in flight not seen")
	}
}
