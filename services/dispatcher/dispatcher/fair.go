package dispatcher

import (
	"container/heap"
	"time"
)

// The fair scheduler picks which lane starts the next attempt. Attempts
// in flight are shared across tenants first, then across the endpoints of
// a tenant, by round robin over the lanes that can start one now (work
// waiting, cap and rate allowing): each turn serves one tenant's next
// runnable lane, then that tenant goes to the back. A tenant holding its
// share of the attempt memory (the budget over the tenants with work) is
// passed over while another tenant can start something, so no tenant
// holds more than its share while others have work; when nobody else
// can, it may use what is idle.
//
// The attempt budget is memory, not a pool: each attempt is charged a
// fixed overhead plus its payload, so a receiver that hangs costs a
// goroutine and a socket, and a dispatcher runs as many attempts as its
// memory budget allows.
//
// Lanes waiting for their rate sit in a heap by wake time; lanes waiting
// for their cap return when an attempt of theirs completes.
//
// Only the loop goroutine touches the scheduler.

// attemptOverhead is what an attempt in flight is charged beyond its
// payload: goroutine stack, request and response buffers, a connection.
const attemptOverhead = 32 << 10

// tenant is one tenant's share of the dispatcher.
type tenant struct {
	id     string
	ring   fifo[*lane] // runnable lanes
	inRing bool
	used   int64 // attempt memory in flight
	lanes  int   // lanes with work (waiting or in flight)
}

type fair struct {
	tenants map[string]*tenant
	lanes   map[string]*lane
	ring    fifo[*tenant] // tenants with a runnable lane
	active  int           // tenants with work
	budget  int64
	used    int64
	flying  int // attempts in flight, of every lane
	waking  wakeHeap
}

func newFair(budget int64) *fair {
	return &fair{tenants: map[string]*tenant{}, lanes: map[string]*lane{}, budget: budget}
}

// lane returns endpoint id's lane, making it (and its tenant's entry) on
// first use.
func (f *fair) lane(id, tenantID string) *lane {
	if l := f.lanes[id]; l != nil {
		return l
	}
	t := f.tenants[tenantID]
	if t == nil {
		t = &tenant{id: tenantID}
		f.tenants[tenantID] = t
	}
	l := newLane(id, t)
	f.lanes[id] = l
	return l
}

// touch updates the work counts after l's queue or in-flight count
// changed.
func (f *fair) touch(l *lane, now time.Time) {
	working := l.queued+l.inFlight > 0
	if working == l.working {
		return
	}
	l.working = working
	t := l.tenant
	if working {
		t.lanes++
		if t.lanes == 1 {
			f.active++
		}
		return
	}
	l.idleSince = now
	t.lanes--
	if t.lanes == 0 {
		f.active--
	}
}

// ready puts l where it will be served: in its tenant's ring when it can
// start now, in the wake heap when only its rate holds it back; a lane
// held by its cap waits for a completion.
func (f *fair) ready(l *lane, now time.Time) {
	if l.inRing || !l.runnable() || !l.capOK() {
		return
	}
	if now.Before(l.heldUntil) {
		f.wakeAt(l, l.heldUntil)
		return
	}
	if ok, at := l.rateReady(now); !ok {
		f.wakeAt(l, at)
		return
	}
	if ok, at := l.batchReady(now); !ok { // batch.go: a partial batch waits for more
		f.wakeAt(l, at)
		return
	}
	if l.heapIdx >= 0 {
		heap.Remove(&f.waking, l.heapIdx)
	}
	l.wakeAt = time.Time{}
	l.inRing = true
	t := l.tenant
	t.ring.push(l)
	if !t.inRing {
		t.inRing = true
		f.ring.push(t)
	}
}

func (f *fair) wakeAt(l *lane, at time.Time) {
	l.wakeAt = at
	if l.heapIdx >= 0 {
		heap.Fix(&f.waking, l.heapIdx)
		return
	}
	heap.Push(&f.waking, l)
}

// wake moves the lanes whose rate allows a start by now into the rings.
func (f *fair) wake(now time.Time) {
	for len(f.waking) > 0 && !f.waking[0].wakeAt.After(now) {
		l := heap.Pop(&f.waking).(*lane)
		l.wakeAt = time.Time{}
		f.ready(l, now)
	}
}

// nextWake is when the earliest rate-held lane may start, or zero.
func (f *fair) nextWake() time.Time {
	if len(f.waking) == 0 {
		return time.Time{}
	}
	return f.waking[0].wakeAt
}

// share is a tenant's fair part of the attempt budget.
func (f *fair) share() int64 {
	return f.budget / int64(max(f.active, 1))
}

// next returns the lane that should start the next attempt, taken out of
// the rings, or nil when none can (nothing runnable, or the budget is
// spent). The caller starts one attempt (or settles the lane's head
// otherwise) and hands the lane back with requeue.
func (f *fair) next() *lane {
	if f.used >= f.budget {
		return nil
	}
	share := f.share()
	for passed := 0; f.ring.len() > 0; {
		t := f.ring.pop()
		t.inRing = false
		if t.ring.len() == 0 {
			continue
		}
		// Over its share while another tenant could start something:
		// the others go first. After a full round of passes everyone
		// is over: the work-conserving case.
		if t.used >= share && passed < f.ring.len() {
			passed++
			t.inRing = true
			f.ring.push(t)
			continue
		}
		l := t.ring.pop()
		l.inRing = false
		return l
	}
	return nil
}

// requeue hands a lane back after next: it goes behind its tenant's other
// runnable lanes, and its tenant behind the other tenants.
func (f *fair) requeue(l *lane, now time.Time) {
	f.ready(l, now)
	t := l.tenant
	if t.ring.len() > 0 && !t.inRing {
		t.inRing = true
		f.ring.push(t)
	}
}

// charge and uncharge account an attempt's memory.
func (f *fair) charge(l *lane, cost int64) {
	l.inFlight++
	f.flying++
	l.tenant.used += cost
	f.used += cost
}

func (f *fair) uncharge(l *lane, cost int64) {
	l.inFlight--
	f.flying--
	l.tenant.used -= cost
	f.used -= cost
}

// prune forgets lanes idle since before cutoff (their limiter state with
// them) and tenants left with none: endpoints deleted or gone quiet cost
// nothing. It returns the endpoint ids it forgot.
func (f *fair) prune(cutoff time.Time) []string {
	var gone []string
	for id, l := range f.lanes {
		if l.working || l.inRing || l.heapIdx >= 0 || l.idleSince.After(cutoff) || l.ord.holds() {
			continue
		}
		delete(f.lanes, id)
		gone = append(gone, id)
	}
	inUse := map[*tenant]bool{}
	for _, l := range f.lanes {
		inUse[l.tenant] = true
	}
	for id, t := range f.tenants {
		if !inUse[t] && !t.inRing {
			delete(f.tenants, id)
		}
	}
	return gone
}

// fifo is a first-in first-out queue.
type fifo[T any] struct {
	items []T
	head  int
}

func (q *fifo[T]) len() int { return len(q.items) - q.head }

func (q *fifo[T]) push(v T) { q.items = append(q.items, v) }

func (q *fifo[T]) pop() T {
	v := q.items[q.head]
	var zero T
	q.items[q.head] = zero
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	} else if q.head > 64 && q.head*2 >= len(q.items) {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	return v
}

// wakeHeap orders rate-held lanes by wake time.
type wakeHeap []*lane

func (h wakeHeap) Len() int           { return len(h) }
func (h wakeHeap) Less(i, j int) bool { return h[i].wakeAt.Before(h[j].wakeAt) }
func (h wakeHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx, h[j].heapIdx = i, j
}
func (h *wakeHeap) Push(x any) {
	l := x.(*lane)
	l.heapIdx = len(*h)
	*h = append(*h, l)
}
func (h *wakeHeap) Pop() any {
	old := *h
	l := old[len(old)-1]
	old[len(old)-1] = nil
	l.heapIdx = -1
	*h = old[:len(old)-1]
	return l
}
