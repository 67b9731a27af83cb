package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/hookline/hookline/services/dispatcher/dispatcher"
)

// The memory checker (issue 23 item 2: "window, lanes, resolver
// goroutines bounded whatever the schedule"). A third of the seeds give
// the dispatchers a small window and small polls, drawn from a stream
// of their own (so the fault schedules stay what they were), so that
// the window's budget is reached under the faults; every dispatcher's
// Memory report is sampled through the run and checked against what
// docs/DESIGN.md "Simulation" derives:
//   - the window's records stay within its budget plus one poll: what a
//     commit in flight popped counts until the commit ends (holdTxn), so
//     an aborted commit puts back (keepTxn) only what no poll replaced;
//   - at most one resolver round is out per partition window (O6's one
//     resolver per partition: a goroutine per delivery was issue 24
//     item 9);
//   - the answers kept stay within their bytes (answered.go).
// Lanes are reported with their maximum, not bounded.

// simMemoryEvery is how often the sampler reads each dispatcher.
const simMemoryEvery = 200 * time.Millisecond

// drawMemory gives a third of the seeds a small window (10-60
// deliveries, 4-16 a poll: a seed's world has some 150-250 deliveries
// over its fault phase, a few dozen in a window at once).
func (w *simWorld) drawMemory(seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x3e3041))
	if r.IntN(3) != 0 {
		return
	}
	w.dc.WindowRecords = 10 + r.IntN(51)
	w.dc.BatchSize = 4 + r.IntN(13)
	w.t.Logf("seed %d: a small window: %d deliveries, %d a poll", w.seed, w.dc.WindowRecords, w.dc.BatchSize)
}

// drawQueue gives half the seeds a tight backlog budget, from a stream
// of its own: --queue-time 100 ms-1 s, so that a lane holds only what
// its pace (its cap over its receivers' latency: the sim's slow answers
// take 200 ms, its timeouts the attempt timeout) starts within it, and
// the rest of a burst is spilled to the retry path and comes back —
// ordered lanes' followers included, their awaited head let in over the
// budget (relief_order_test.go). The seeds' endpoints have no rate
// limit, so before the budget by pace (issue 26) only the window bounded
// their lanes.
func (w *simWorld) drawQueue(seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x9e0e71))
	if r.IntN(2) != 0 {
		return
	}
	w.dc.QueueTime = time.Duration(100+r.IntN(901)) * time.Millisecond
	w.t.Logf("seed %d: a tight backlog budget: --queue-time %v", w.seed, w.dc.QueueTime)
}

// simMemory is the worst of every sample, and what broke a bound.
type simMemory struct {
	mu        sync.Mutex
	samples   int
	window    int
	windowMax int
	bytes     int64
	resolving int
	lanes     int
	answers   int64
	breaches  []string
}

// sample reads one dispatcher's report.
func (sm *simMemory) sample(name string, m dispatcher.Memory) {
	if m.At.IsZero() {
		return
	}
	sm.mu.Lock()
	defer sm.mu.Unlock()
	sm.samples++
	sm.window = max(sm.window, m.WindowRecords)
	sm.windowMax = m.WindowMaxRecords
	sm.bytes = max(sm.bytes, m.WindowBytes)
	sm.resolving = max(sm.resolving, m.Resolving)
	sm.lanes = max(sm.lanes, m.Lanes)
	sm.answers = max(sm.answers, m.AnswerBytes)
	breach := func(format string, args ...any) {
		if len(sm.breaches) < 10 {
			sm.breaches = append(sm.breaches, name+": "+fmt.Sprintf(format, args...))
		}
	}
	if bound := m.WindowMaxRecords + m.PollRecords; m.WindowRecords > bound {
		breach("window holds %d deliveries, bound %d (budget %d, poll %d)", m.WindowRecords, bound, m.WindowMaxRecords, m.PollRecords)
	}
	if m.Resolving > m.Partitions {
		breach("%d resolver rounds out for %d partitions", m.Resolving, m.Partitions)
	}
	if m.AnswerBytes > m.AnswerMaxBytes {
		breach("answers kept: %d bytes, bound %d", m.AnswerBytes, m.AnswerMaxBytes)
	}
}

// sampleMemory reads every running dispatcher until ctx ends.
func (w *simWorld) sampleMemory(ctx context.Context) {
	tick := time.NewTicker(simMemoryEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, s := range w.liveSlots() {
			if d := s.dispatcher(); d != nil {
				w.memory.sample(fmt.Sprint("dispatcher-", s.n), d.Memory())
			}
		}
	}
}

// checkMemory adds the memory checker's findings to r.
func (w *simWorld) checkMemory(r *simReport) {
	sm := &w.memory
	sm.mu.Lock()
	defer sm.mu.Unlock()
	w.t.Logf("seed %d: memory over %d samples: window at most %d deliveries (budget %d), %d bytes; resolver rounds at most %d; lanes at most %d; answers at most %d bytes",
		w.seed, sm.samples, sm.window, sm.windowMax, sm.bytes, sm.resolving, sm.lanes, sm.answers)
	if sm.samples == 0 {
		r.other++
		r.note("memory: no dispatcher reported its memory")
	}
	for _, b := range sm.breaches {
		r.other++
		r.note("memory: %s", b)
	}
}
