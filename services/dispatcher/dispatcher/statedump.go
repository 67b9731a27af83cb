package dispatcher

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A state dump is the loop's own account of its lanes, for a stall that
// a test (the fault simulation's stall dump) must explain: per lane its
// queue, cap and scheduling state, per ordered lane its head, waiting
// members and the members it waits for outside memory, and the
// endpoint's outage state. Only the loop reads lanes, so it writes the
// dump when asked, at its next turn (at most reliefTick later, sooner
// when woken).

// stateDumps is the request and the answer. Safe for concurrent use.
type stateDumps struct {
	wanted atomic.Bool // read by the loop every turn, without the lock
	mu     sync.Mutex
	ready  chan string
}

// DumpState returns the loop's account of its lanes, or an error when
// the loop does not answer before ctx ends (it is not running).
func (s *Service) DumpState(ctx context.Context) (string, error) {
	ready := make(chan string, 1)
	s.dumps.mu.Lock()
	s.dumps.ready = ready
	s.dumps.mu.Unlock()
	s.dumps.wanted.Store(true)
	if e := s.loop.Load(); e != nil {
		e.in.wake()
	}
	select {
	case d := <-ready:
		return d, nil
	case <-ctx.Done():
		return "", fmt.Errorf("dispatcher: no state dump: %w", ctx.Err())
	}
}

// dumpState answers a pending request (loop goroutine).
func (e *engine) dumpState(now time.Time) {
	d := &e.s.dumps
	if !d.wanted.Swap(false) {
		return
	}
	d.mu.Lock()
	ready := d.ready
	d.ready = nil
	d.mu.Unlock()
	if ready != nil {
		ready <- e.describe(now)
	}
}

// describe writes the account (loop goroutine).
func (e *engine) describe(now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "window: %d deliveries (%d done), %d bytes; committing %v, backing off %v, retrying %v, attempts may start %v, yield phase %d, in flight (outstanding) %d, attempt memory %d of %d\n",
		e.w.records, e.w.done, e.w.bytes, e.c.committing, e.c.backingOff, e.c.retrying, e.c.attemptsMayStart(now) && !e.y.attemptsHeld(), e.y.phase, e.outstanding, e.f.used, e.f.budget)
	for _, pw := range e.w.parts {
		fmt.Fprintf(&b, "partition %s/%d: watermark %d, next %d, %d entries, paused %v, head since %v", pw.k.topic, pw.k.partition, pw.watermark(), pw.next, len(pw.entries)-pw.head, pw.paused, now.Sub(pw.headSince).Round(time.Millisecond))
		if h := pw.oldest(); h != nil && h.d != nil {
			fmt.Fprintf(&b, ", oldest %s (state %d)", h.d.GetDeliveryId(), h.state)
		}
		b.WriteString("\n")
	}
	ids := make([]string, 0, len(e.f.lanes))
	for id, l := range e.f.lanes {
		if l.queued+l.inFlight > 0 || l.ord != nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		l := e.f.lanes[id]
		fmt.Fprintf(&b, "lane %s: queued %d, in flight %d of %d, in ring %v, rate wait %v, runnable %v; %s\n",
			id, l.queued, l.inFlight, l.cap, l.inRing, !l.wakeAt.IsZero(), l.runnable(), e.s.rcv.Describe(id, now))
		if l.ord == nil {
			continue
		}
		for key, k := range l.ord.keys {
			fmt.Fprintf(&b, "  key %q: startable %v, in ready %v, pending %d", key, k.startable(), k.inReady, k.pending)
			if k.head != nil {
				fmt.Fprintf(&b, ", head %s@%d (state %d)", k.head.d.GetDeliveryId(), seq(k.head), k.head.state)
			}
			b.WriteString("\n    waiting:")
			for _, m := range k.members {
				if m != nil && m.d != nil {
					fmt.Fprintf(&b, " %s@%d(state %d)", m.d.GetDeliveryId(), seq(m), m.state)
				}
			}
			b.WriteString("\n    outside:")
			for id, out := range k.outside {
				fmt.Fprintf(&b, " %s@%d(until %v, blocked %v)", id, out.seq, out.until.Sub(now).Round(time.Second), out.blocked != nil)
			}
			b.WriteString("\n    committed outside:")
			for id, m := range k.committed {
				fmt.Fprintf(&b, " %s@%d", id, m.GetLaneSeq())
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}
