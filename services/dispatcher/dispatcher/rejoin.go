package dispatcher

import (
	"context"
	"sync"
	"time"

	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A static member (--group-instance-id) that restarts within its
// session timeout takes its partitions back with no rebalance (KIP-345):
// the coordinator hands the new process the assignment it kept for the
// instance. Unless the instance is the group's leader. The coordinator
// then asks it to skip assigning (KIP-814), but franz-go, whose
// cooperative-sticky balancer it is, plans anyway, from the metadata
// each member sent at its last join, and joins again to force a
// rebalance when its own plan differs from the kept assignment. A
// process just started owns nothing, and the other members' metadata
// is from their last join (in a cooperative hand-off's first round,
// from before they owned anything), so the plan is drawn afresh and
// differs more often than not: the rebalance that follows cancels the
// restarted member's first offset fetch, and its partitions, which have
// waited since its predecessor began to drain, wait 0.35-0.5 s more
// (the chaos rolling upgrade on three brokers; docs/reliability.md).
//
// So before a session joins, it reads what the group still assigns its
// instance (DescribeGroups) and its join asks for those partitions back,
// as the sticky balancer's history (syncedBalancer.askBack): the
// restarted leader's plan is the kept assignment, and nothing moves.
// The history yields to any member that owns a partition in a later
// generation. An instance the group no longer lists (its session ended,
// it never joined) asks for nothing, and a read that fails costs only
// the rebalance it would have saved.

// describeTimeout bounds the read of the group's description.
const describeTimeout = 2 * time.Second

// sessionStart is what a group session needs done before it joins.
type sessionStart struct {
	owned []int32 // what the group assigned this instance (deliveries topic)
	gen   int32   // the generation of the instance's last join
}

// startSession fences the session's transactional id (an earlier
// instance's open transaction ended: nothing behind it is readable until
// then) and, beside that, reads what the group still assigns this
// instance, both on one short-lived client.
func (s *Service) startSession(ctx context.Context) (*sessionStart, error) {
	opts, err := s.cfg.Kafka.Opts()
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	start := &sessionStart{}
	var wg sync.WaitGroup
	wg.Go(func() { start.owned, start.gen = s.assignedBefore(ctx, cl) })
	err = hkafka.Fence(ctx, cl, s.cfg.TransactionalID, s.cfg.TxnTimeout)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	return start, nil
}

// assignedBefore returns the partitions of the deliveries topic the group
// assigns this static instance now, and the generation of its last join
// (none when the dispatcher is not a static member, the group does not
// list the instance, or the read fails).
func (s *Service) assignedBefore(ctx context.Context, cl *kgo.Client) ([]int32, int32) {
	if s.cfg.GroupInstanceID == "" {
		return nil, 0
	}
	ctx, cancel := context.WithTimeout(ctx, describeTimeout)
	defer cancel()
	described, err := kadm.NewClient(cl).DescribeGroups(ctx, s.cfg.Group)
	if err != nil {
		s.log.Debug("the group's description not read; a restarted leader may cause a rebalance", "err", err)
		return nil, 0
	}
	g, ok := described[s.cfg.Group]
	if !ok || g.Err != nil {
		return nil, 0
	}
	for _, m := range g.Members {
		if m.InstanceID == nil || *m.InstanceID != s.cfg.GroupInstanceID {
			continue
		}
		a, ok := m.Assigned.AsConsumer()
		if !ok {
			return nil, 0
		}
		var gen int32
		if j, ok := m.Join.AsConsumer(); ok {
			gen = max(j.Generation, 0)
		}
		for _, t := range a.Topics {
			if t.Topic == s.topics.Deliveries {
				return t.Partitions, gen
			}
		}
	}
	return nil, 0
}
