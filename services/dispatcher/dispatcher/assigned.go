package dispatcher

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// An assignment's partitions are polled only once its callback returned
// (kgo.BlockRebalanceOnPoll), so every read the callback makes is time
// its partitions stand still: after a restart, a static member's
// partitions have waited since its predecessor stopped, and the healthy
// deliveries behind them wait on (issue 23's rolling upgrade, healthy
// p99 ≤ 2 s). The callback's reads are independent of one another:
//
//   - the notices view caught up (reseedHealth: the assigned endpoints'
//     health is seeded from it);
//   - the group's committed offsets of the assigned partitions, read once
//     for both of their users: the offsets committed above them
//     (seedSkips) and the recent past below them (seedCopies);
//   - that recent past (a client of its own; lookback.go).
//
// So the notices sync runs beside the offsets read and the lookback that
// follows it, and the callback takes the longer of the two, not their sum.

// seedAssigned reads what the loop must know of the partitions in
// assigned before it polls them.
func (s *Service) seedAssigned(ctx context.Context, cl *kgo.Client, e *engine, assigned map[string][]int32) {
	if len(assigned[s.topics.Deliveries]) == 0 {
		// Nothing new (a cooperative rebalance that only took
		// partitions away): the callback returns at once, since the
		// loop does not poll while it runs (yield.go).
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { s.reseedHealth(ctx, assigned) })
	defer wg.Wait()
	committed, ok := s.committedOffsets(ctx, cl)
	if !ok {
		return
	}
	s.seedSkips(e, assigned, committed)
	s.seedCopies(ctx, cl, e, assigned, committed)
}

// committedOffsets reads the group's committed offsets, for at most
// lookbackTimeout. A read that fails is logged: the loop then skips
// nothing it does not already know, and remembers no copies (duplicates,
// never a loss).
func (s *Service) committedOffsets(ctx context.Context, cl *kgo.Client) (kadm.OffsetResponses, bool) {
	ctx, cancel := context.WithTimeout(ctx, lookbackTimeout)
	defer cancel()
	committed, err := kadm.NewClient(cl).FetchOffsets(ctx, s.cfg.Group)
	if err != nil {
		s.log.Warn("committed offsets not read; deliveries committed above the watermark, and copies of deliveries taken before, are attempted again", "err", err)
		return nil, false
	}
	return committed, true
}
