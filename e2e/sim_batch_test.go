package e2e

import (
	"math/rand/v2"
	"time"
)

// Batching in make sim (issue 30): about half of a world's unordered
// endpoints batch, from 2 to 10 events within 0, 50 or 200 ms. The
// receiver model answers a batch as one POST driven by its first
// member's plan, and every member takes that answer (sim_model_test.go:
// membersOf); the checks stay per delivery — exactly one terminal result
// each, none lost, the receiver's verdict matching the result — so a
// batch formed, retried, held, spilled, faulted or moved by a rebalance
// or a crash is held to what any delivery is. Drawn from a stream of its
// own, so a seed's other draws (its endpoints, plans, faults) are what
// they were before batching.
func (w *simWorld) drawBatching() {
	rng := rand.New(rand.NewPCG(w.seed, 0xba7c))
	for _, ep := range w.eps {
		if ep.ordered() || rng.IntN(2) == 0 {
			continue
		}
		ep.batch = uint32(2 + rng.IntN(9))
		ep.batchWait = []time.Duration{0, 50 * time.Millisecond, 200 * time.Millisecond}[rng.IntN(3)]
	}
}
