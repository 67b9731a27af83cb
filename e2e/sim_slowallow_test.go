package e2e

import (
	"log/slog"
	"math/rand/v2"
	"time"
)

// The hand-off's nemesis (I44, yield.go). franz-go ends a cooperative
// session with a revoke of nothing, which a dispatcher's loop allows at
// once, and revokes the partitions the next SyncGroup moved away as soon
// as the member has joined again. That second revoke must wait for the
// loop however long the loop's turn takes; a loop that counted a poll
// again only at its next poll let it run without the loop whenever the
// turn outlasted a join (1 duplicate in 3,053 under load, found by an
// e2e run, not by the simulation: kfake answers a join in about a
// millisecond and the worlds' loops are quick). In half the worlds the
// dispatchers' loops are held, during the fault phase, for a drawn
// 100-1,500 ms right after each callback they allow that revokes
// nothing (`slow-allow`), so every rebalance of the fault schedule
// meets a slow loop at that step.

// drawSlowAllow draws whether and for how long the dispatchers' loops
// are held after an allowed callback that revokes nothing.
func (w *simWorld) drawSlowAllow(seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x510a11))
	if r.IntN(2) != 0 {
		return
	}
	w.slowAllowFor = time.Duration(100+r.IntN(1400)) * time.Millisecond
	w.t.Logf("seed %d: in the fault phase each dispatcher's loop is held %v after it allows a callback that revokes nothing", w.seed, w.slowAllowFor)
}

// slowAllowLogger wraps a dispatcher's logger with the hold, when the
// world draws one.
func (w *simWorld) slowAllowLogger(l *slog.Logger) *slog.Logger {
	if w.slowAllowFor == 0 {
		return l
	}
	return slog.New(allowHold{Handler: l.Handler(), hold: func() {
		if !w.faulting.Load() {
			return
		}
		w.count("slow-allow", false)
		time.Sleep(w.slowAllowFor)
	}, revoked: func() {}})
}
