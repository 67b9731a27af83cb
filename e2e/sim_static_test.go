package e2e

import "math/rand/v2"

// drawStatic makes half the seeds' dispatchers static group members
// (--group-instance-id, one id per slot, kept across its crashes and
// restarts), as the chart and the chaos stack run them: a restarted
// slot takes its partitions back with no rebalance, asking for them by
// the group's description first (rejoin.go), and a stopped one holds
// them until its session times out. The model's rules hold either way;
// what the seeds exercise is the static rejoin under every other fault.
// Drawn from a stream of its own.
func (w *simWorld) drawStatic(seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x57a71c))
	if r.IntN(2) != 0 {
		return
	}
	w.dc.GroupInstanceID = w.st.kafka.TopicPrefix + "dispatcher-"
	w.t.Logf("seed %d: the dispatchers are static group members", w.seed)
}
