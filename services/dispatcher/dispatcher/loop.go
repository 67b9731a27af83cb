package dispatcher

import (
	"context"
	"errors"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/payloadref"
	"github.com/hookline/hookline/platform/telemetry"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The dispatch loop is one goroutine that owns the window, the lanes and
// the fair scheduler. Data flows one way through it:
//
//	poll → place (triage, lane) → pump (fair pick, start) → attempt
//	goroutine → inbox → window → commit
//
// Attempts run on goroutines of their own and report back through the
// inbox, which also wakes a poll in progress, so a completion starts the
// next waiting delivery at once rather than at the next poll.

// engine is the loop's state.
type engine struct {
	s  *Service
	w  *window
	f  *fair
	in *inbox
	// fetch pauses partitions over their share of the window (nil in
	// tests without a session).
	fetch fetchPauser

	// work is the base of every attempt's context: it outlives the
	// loop's context so that a shutdown lets attempts drain, and ends at
	// the drain deadline.
	work       context.Context
	cancelWork context.CancelFunc

	// outstanding counts attempt and resolver goroutines not yet
	// reported (a partition has at most one resolver: resolve.go), and
	// a commit's transaction and its backoff (commit.go).
	outstanding int
	// c builds the commits and carries the one in progress: the entries
	// it popped or takes above their watermark, its lanes share, the
	// poll gate, the backoff after an abort (commit.go, above.go).
	c *committer
	// ord keeps the ordered lanes' turns (ordered.go, block.go).
	ord *orderedLanes
	// cmds applies operators' commands on blocked lanes (lanecmd.go).
	cmds *laneCommands
	// sp spills what waits too long, and what a stop or a rebalance
	// leaves waiting, round the retry path (spill.go).
	sp   *spiller
	msgs []msg
	lag  *telemetry.Lag
	// recent remembers the deliveries placed lately, to skip copies;
	// seeds are what assignments read of their partitions' past for it.
	recent *recent
	seeds  seeds
	// stopping is set once the loop's context ended: it drains, and an
	// aborted commit then drops the window instead of keeping its work
	// for another try (committer.committed): a stopping loop does not
	// back off (its context is over), so a kept window would be
	// committed and aborted again at once, for ever.
	stopping bool
	// rs holds the entries that wait before they are placed: for their
	// partition's views (the lanes, the endpoints) or a blocked head's
	// payload read back for its command (resolve.go, lanecmd.go).
	rs *resolvers
	// early are the deliveries read a little before their due time,
	// waiting in memory until it (early.go).
	early earlyHolds
	// y is the hand-off of a rebalance that moves partitions away
	// (yield.go).
	y handOff
	// member is the group member id the session's partitions were
	// assigned under: another one ends the session (hkafka.Membership).
	member hkafka.Membership
}

func (s *Service) newEngine() *engine {
	work, cancel := context.WithCancel(context.Background())
	e := &engine{
		s:          s,
		w:          newWindow(s.cfg.WindowRecords, s.cfg.WindowBytes),
		f:          newFair(s.cfg.AttemptMemory),
		in:         newInbox(),
		work:       work,
		cancelWork: cancel,
		recent:     newRecent(recentDeliveries),
		early:      earlyHolds{cfg: &s.cfg},
	}
	e.c = &committer{
		w: e.w, in: e.in, member: &e.member, work: work,
		cfg: &s.cfg, log: s.log,
		after: s.afterTransaction, pauses: &s.pauses, answered: s.answersCommitted,
		lanes: laneCommit{topic: s.topics.Lanes, writer: s.writer},
	}
	e.y.synced = newSyncedBalancer(s.topics.Deliveries)
	e.y.wake = e.in.wake
	e.rs = &resolvers{in: e.in, outstanding: &e.outstanding, read: s.readState, place: e.placeNow}
	e.rs.readRecord = func(ctx context.Context, ref *hooklinev1.RecordRef) (*kgo.Record, error) {
		opts, err := s.cfg.Kafka.Opts()
		if err != nil {
			return nil, err
		}
		return payloadref.Read(ctx, opts, ref)
	}
	e.ord = &orderedLanes{
		w: e.w, f: e.f, cfg: &s.cfg, log: s.log, now: s.now,
		store: s.store, view: s.lanes, writer: s.writer, topics: &s.topics,
		fits: e.c.lanes.fits,
	}
	e.sp = &spiller{
		w: e.w, f: e.f, cfg: &s.cfg, log: s.log, holds: s.holds, signers: s.signers, creds: s.creds,
		settle: e.settle, expire: e.ord.expireOrdered,
	}
	e.ord.sp = e.sp
	e.cmds = &laneCommands{
		w: e.w, f: e.f, cfg: &s.cfg, log: s.log,
		store: s.store, writer: s.writer, topics: &s.topics,
		ord: e.ord, rs: e.rs, settle: e.settle,
	}
	e.w.created = func(pw *partWindow) { pw.above = e.c.skip.get(pw.k) }
	e.w.popped = e.c.popped
	return e
}

// dropped is the partition callback for revoked and lost partitions: their
// attempts are cancelled now, and the loop drops their waiting deliveries
// at its next turn.
func (e *engine) dropped(m map[string][]int32) {
	e.w.forget(m)
	e.lag.Forget(m)
	e.in.wake()
}

// dispatch runs the loop until ctx ends, then drains: no new attempt
// starts, attempts in flight may finish for DrainTimeout, and what
// finished is committed.
func (s *Service) dispatch(ctx context.Context, sess *kgo.GroupTransactSession, e *engine) error {
	defer e.end()
	s.loop.Store(e)
	defer s.loop.CompareAndSwap(e, nil)
	var drainBy time.Time
	for {
		now := s.now()
		stopping := ctx.Err() != nil
		e.stopping = stopping
		e.sweep(now)
		if err := e.collect(now); err != nil {
			return err
		}
		// An expelled member that joined again as a new one holds
		// stale state, and a commit would be accepted: the session
		// ends, and a new one starts from what Kafka committed.
		if err := e.member.CheckClient(sess.Client()); err != nil {
			return err
		}
		e.reportMemory(now)
		e.dumpState(now)
		if e.y.active() {
			e.y.step(now, e.handOffWork(sess, now)) // yield.go
		}
		if stopping {
			e.sp.handOff(now) // drain.go
		}
		if !stopping {
			e.turn(now)
		}
		due := now.Sub(e.c.lastCommit) >= s.cfg.CommitInterval
		if stopping {
			due = drainCommitDue(e.f.flying, now, drainBy) // drain.go
		}
		if !e.c.committing && (e.w.done > 0 || e.y.commitForced(e.c.begun)) && (due || e.y.commitForced(e.c.begun)) {
			if e.c.commit(ctx, sess, now) {
				e.outstanding++ // its transaction reports back (commit.go)
			} else {
				e.c.lastCommit = now // nothing to write: no transaction
			}
		}
		if stopping {
			if e.outstanding == 0 {
				return nil
			}
			if drainBy.IsZero() {
				drainBy = now.Add(s.cfg.DrainTimeout)
			}
			if !now.Before(drainBy) {
				// Attempts still running return at once now; their
				// records stay uncommitted and are attempted again
				// after the restart.
				e.cancelWork()
			}
			e.idle(context.Background(), drainBy.Sub(now))
			continue
		}
		if err := e.wait(ctx, sess, now); err != nil {
			return err
		}
	}
}

// turn starts what may start and relieves what waits. What can start
// starts before relief looks for what waits: a full window spills only
// deliveries that could not start (spill.go); relief before the pump
// spilled what the pump was about to start, and under a backlog that
// keeps the window full a lane went round the retry path again and
// again (make sim seed 9, a window of 12).
func (e *engine) turn(now time.Time) {
	e.f.wake(now)
	e.early.wake(now, e.place) // early.go
	e.pump(now)
	e.sp.relieve(now)
}

// wait blocks until there is something to do: records polled, a message
// in the inbox, a lane's rate allowing a start, a commit or a relief
// check due.
func (e *engine) wait(ctx context.Context, sess *kgo.GroupTransactSession, now time.Time) error {
	s := e.s
	var timeout time.Duration
	if at := e.nextDeadline(now); !at.IsZero() {
		timeout = max(at.Sub(now), 0)
	}
	e.fetch = sess.Client()
	e.shareFetch()
	if e.w.full() || e.c.gate.closed() || e.y.pollHeld() {
		// No more records until commits make room (relief spills
		// partitions whose oldest record waits in a queue), none
		// while a transaction ends, and none while a rebalance is
		// handed off (yield.go).
		e.idle(ctx, timeout)
		return nil
	}
	pctx, cancel := context.WithCancel(ctx)
	if timeout > 0 {
		pctx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	e.c.gate.mu.Lock()
	if !e.in.arm(cancel) {
		e.c.gate.mu.Unlock()
		return nil // messages are waiting
	}
	// Checked after arming: a commit that shuts the gate from now on
	// cancels this poll.
	if e.c.gate.closed() || (timeout == 0 && !e.nextDeadline(now).IsZero()) {
		e.in.disarm()
		e.c.gate.mu.Unlock()
		return nil // a transaction is ending, or something is due now
	}
	e.y.rearmed(sess)
	token := s.probe.PollBegins()
	fs := sess.PollRecords(pctx, s.cfg.BatchSize)
	s.probe.PollEnded(token)
	e.in.disarm()
	e.c.gate.mu.Unlock()
	if fs.IsClientClosed() {
		return errors.New("dispatcher: kafka client closed")
	}
	e.lag.Observe(fs)
	fs.EachError(func(t string, p int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			s.log.Warn("fetch error", "topic", t, "partition", p, "err", err)
		}
	})
	e.seeds.takeInto(e.recent)
	now = s.now()
	fs.EachRecord(func(r *kgo.Record) {
		if en := e.w.add(r, now, e.work); en != nil {
			e.place(en, now)
		}
	})
	return nil
}

// idle waits for a message, the timeout (0: none) or ctx, without polling.
func (e *engine) idle(ctx context.Context, timeout time.Duration) {
	var tc <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		tc = t.C
	}
	select {
	case <-e.in.signal:
	case <-tc:
	case <-ctx.Done():
	}
}

// nextDeadline is the earliest time the loop has something to do without
// being woken: a rate-held lane's start, a delivery held early coming
// due, a commit, a relief check.
func (e *engine) nextDeadline(now time.Time) time.Time {
	var at time.Time
	earlier := func(t time.Time) {
		if !t.IsZero() && (at.IsZero() || t.Before(at)) {
			at = t
		}
	}
	earlier(e.f.nextWake())
	earlier(e.early.next())
	earlier(e.y.deadline())
	if e.w.done > 0 && !e.c.committing {
		earlier(e.c.lastCommit.Add(e.s.cfg.CommitInterval))
	}
	if e.w.records > 0 {
		earlier(e.sp.lastRelieve.Add(reliefTick))
	}
	return at
}

// sweep drops the partitions the callbacks (or an aborted commit) marked:
// their waiting deliveries leave their lanes at once; their attempts
// were cancelled and report back to be discarded.
func (e *engine) sweep(now time.Time) {
	dropped := e.w.takeDropped()
	e.resumeDropped(dropped)
	for _, pw := range dropped {
		e.w.release(pw)
		for _, en := range pw.entries[pw.head:] {
			switch en.state {
			case entryQueued:
				en.lane.unqueue(en)
				en.state = entryDropped
				e.f.touch(en.lane, now)
			case entryDone:
				e.s.pauses.dropped(en.outs)
				en.outs, en.state = nil, entryDropped
			}
		}
		pw.entries, pw.head, pw.resolving = nil, 0, nil
		e.ord.forgetOrdered(pw)
	}
}

// dropWindow drops what the window still holds when the loop ends: its
// outputs are never committed by this loop.
func (e *engine) dropWindow() {
	e.w.forgetAll()
	e.sweep(e.s.now())
}

// end ends the loop: what was not committed by now never will be (the
// window is dropped), the attempts' work is cancelled, and end returns
// once every goroutine the loop started (attempts, resolver rounds,
// blocked-head reads, a commit and its backoff) has reported back. After
// a failed session none of them runs on into the next one, which begins
// from a fresh state (docs/DESIGN.md I40); after a drain there are none.
//
// Attempts still in flight get endGrace to finish first: one that ends
// keeps its receiver's 2xx answer (answered.go), so the next session —
// this dispatcher's, when the partitions stay — settles the delivery
// without a second POST; one cancelled mid-request is POSTed again.
func (e *engine) end() {
	e.settleInFlight(endGrace)
	e.dropWindow()
	e.cancelWork()
	defer e.y.wait() // before the session closes (yield.go)
	for {
		e.takeAndDiscard()
		if e.outstanding <= 0 {
			return
		}
		<-e.in.signal
	}
}

// endGrace bounds how long an ending loop waits for its attempts in
// flight before it cancels them: a receiver answering within it is not
// POSTed again by the next session
// (TestADeliveryInFlightWhenItsSessionEndsIsNotPOSTedAgain, receivers
// answering after 100 ms). A tenth of the default 10 s attempt timeout;
// the next session starts at most this much later.
const endGrace = time.Second

// settleInFlight waits, at most d, until no attempt of the loop is in
// flight, discarding what reports back meanwhile (loop goroutine, once
// the loop stopped acting on messages).
func (e *engine) settleInFlight(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		e.takeAndDiscard()
		if e.f.used <= 0 { // each attempt in flight is charged at least attemptOverhead
			return
		}
		select {
		case <-e.in.signal:
		case <-t.C:
			return
		}
	}
}

// takeAndDiscard takes the inbox and discards every message in it.
func (e *engine) takeAndDiscard() {
	e.msgs = e.in.take(e.msgs)
	for i := range e.msgs {
		e.discard(&e.msgs[i])
	}
	clear(e.msgs)
}

// discard takes a message the loop will not act on (it ended, or its
// session failed): nothing it carries is committed, so an attempt's
// automatic pause is settled as dropped; an aborted commit's backoff
// still reports its end.
func (e *engine) discard(m *msg) {
	e.outstanding--
	switch m.kind {
	case msgDone:
		e.f.uncharge(m.e.lane, m.e.cost)
		e.s.pauses.dropped(m.outs)
	case msgCommitted:
		if m.err == nil && !m.committed && !errors.Is(m.produceErr, errBackoffEnded) {
			e.outstanding++ // its backoff's end follows
		}
	}
}

// collect takes the inbox: ended attempts give their slot back and their
// outputs to the window; resolved entries are placed again; a commit's
// end is taken (its failure is the loop's).
func (e *engine) collect(now time.Time) error {
	e.msgs = e.in.take(e.msgs)
	defer clear(e.msgs)
	for i := range e.msgs {
		m := &e.msgs[i]
		e.outstanding--
		en := m.e
		switch m.kind {
		case msgCommitted:
			backoff, err := e.c.committed(m, now, e.stopping)
			if err != nil {
				for j := i + 1; j < len(e.msgs); j++ {
					e.discard(&e.msgs[j]) // the session failed: the loop ends (end)
				}
				return err
			}
			if backoff {
				// Aborted: what it dropped goes now, and the
				// backoff's end follows (commit.go).
				e.sweep(now)
				e.outstanding++
			}
		case msgDone:
			l := en.lane
			e.f.uncharge(l, en.cost)
			if m.latency > 0 {
				l.observe(m.latency)
			}
			if !en.part.dropped {
				m.outs = e.ord.settledOrdered(en, m.outs, now)
			}
			e.f.touch(l, now)
			e.f.requeue(l, now)
			if en.part.dropped {
				e.s.pauses.dropped(m.outs)
			} else {
				e.w.finish(en, m.outs)
				en.formed = m.formed
				for _, g := range m.group { // a batch's members: committed with it (batch.go)
					e.w.finish(g, nil)
				}
			}
		case msgResolved:
			e.rs.resolved(m, now)
		case msgHeadRead:
			e.rs.headRead(m, now)
		}
	}
	return nil
}

// pump starts attempts while the fair scheduler has a lane that can.
func (e *engine) pump(now time.Time) {
	if !e.c.attemptsMayStart(now) || e.y.attemptsHeld() {
		return // commits cannot land (or a rebalance is handed off): what completes now would wait uncommitted
	}
	for {
		l := e.f.next()
		if l == nil {
			return
		}
		e.start(l, now)
		e.f.requeue(l, now)
	}
}
