package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The faults beyond kill -9 (issue 23 item 5), each a function of the
// run's env so a scenario can run one alone or the storm can overlap
// them: a process paused past its group session (SIGSTOP, SIGCONT), a
// process cut off from the brokers or on a slow link (its KafkaLink),
// the leader of a busy partition moved again and again, the broker that
// coordinates a dispatcher's transactions killed.

// sessionTimeout is the services' group session timeout (the default of
// --session-timeout of the dispatcher and the scheduler): a pause or a
// partition longer than this makes the group give the process's
// partitions to another member while the process still believes it
// owns them.
const sessionTimeout = 10 * time.Second

// beyondSession is how long a pause or a partition lasts: past the
// session timeout, so the rest of the group moves on without the
// process, and it comes back a zombie that must find itself fenced.
const beyondSession = sessionTimeout + 8*time.Second

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// pause SIGSTOPs the i-th process of kind for d, then SIGCONTs it.
func (e *env) pause(ctx context.Context, kind string, i int, d time.Duration) (string, error) {
	p := e.st.find(kind, i)
	if p == nil {
		return "", fmt.Errorf("no %s-%d", kind, i)
	}
	e.mark()
	if err := p.Pause(); err != nil {
		return "", err
	}
	err := sleep(ctx, d)
	if rerr := p.Resume(); rerr != nil {
		return "", rerr
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("SIGSTOP %s %.0f s", p.Name, d.Seconds()), nil
}

// partition cuts the named process's link to the brokers for d.
func (e *env) partition(ctx context.Context, name string, d time.Duration) (string, error) {
	l := e.st.links[name]
	if l == nil {
		return "", fmt.Errorf("no link of %s", name)
	}
	e.mark()
	l.Partition()
	err := sleep(ctx, d)
	l.Heal()
	return fmt.Sprintf("partition %s from the brokers %.0f s", name, d.Seconds()), err
}

// slowLink delays every Kafka request and response of the named process
// by delay for d.
func (e *env) slowLink(ctx context.Context, name string, delay, d time.Duration) (string, error) {
	l := e.st.links[name]
	if l == nil {
		return "", fmt.Errorf("no link of %s", name)
	}
	e.mark()
	l.Delay(delay)
	err := sleep(ctx, d)
	l.Delay(0)
	return fmt.Sprintf("%v on %s's link %.0f s", delay, name, d.Seconds()), err
}

// admin is a Kafka admin client on the brokers themselves (never
// through a link).
func (e *env) admin() (*kadm.Client, func(), error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.st.brokers, ",")...))
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl.Close, nil
}

// busiestPartition is the deliveries topic's partition with the most
// records: where a leader move interrupts the most work.
func (e *env) busiestPartition(ctx context.Context, adm *kadm.Client) (string, int32, error) {
	topic := e.st.prefix + "deliveries"
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return "", 0, err
	}
	best, most := int32(-1), int64(-1)
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Offset > most {
			best, most = o.Partition, o.Offset
		}
	})
	if best < 0 {
		return "", 0, fmt.Errorf("no offsets of %s", topic)
	}
	return topic, best, nil
}

// bounceLeader moves the leadership of the busiest deliveries partition
// to another replica every every, for d: each move reorders the
// replicas (the new first is the preferred leader) and elects the
// preferred one, as an operator's rebalancing tool does. It needs
// three brokers.
func (e *env) bounceLeader(ctx context.Context, every, d time.Duration) (string, error) {
	if e.cfg.Nodes < 3 {
		return "", errors.New("bounce-leader needs 3 brokers")
	}
	adm, done, err := e.admin()
	if err != nil {
		return "", err
	}
	defer done()
	topic, part, err := e.busiestPartition(ctx, adm)
	if err != nil {
		return "", err
	}
	e.mark()
	end := time.Now().Add(d)
	moves := 0
	for time.Now().Before(end) {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return "", err
		}
		pd, ok := md.Topics[topic].Partitions[part]
		if !ok || len(pd.Replicas) < 2 {
			return "", fmt.Errorf("%s/%d: no replicas in metadata", topic, part)
		}
		// Rotate: the next replica becomes the preferred leader.
		reps := slices.Clone(pd.Replicas)
		i := slices.Index(reps, pd.Leader)
		next := reps[(i+1)%len(reps)]
		reps = append([]int32{next}, slices.DeleteFunc(reps, func(r int32) bool { return r == next })...)
		var req kadm.AlterPartitionAssignmentsReq
		req.Assign(topic, part, reps)
		if _, err := adm.AlterPartitionAssignments(ctx, req); err != nil {
			return "", fmt.Errorf("reassign %s/%d: %w", topic, part, err)
		}
		var set kadm.TopicsSet
		set.Add(topic, part)
		if _, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set); err != nil {
			return "", fmt.Errorf("elect %s/%d: %w", topic, part, err)
		}
		moves++
		if err := sleep(ctx, every); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("moved the leader of deliveries/%d %d times, every %v", part, moves, every), nil
}

// killTxnCoordinator kill -9s the broker that coordinates dispatcher-0's
// transactions and starts it again after down.
func (e *env) killTxnCoordinator(ctx context.Context, down time.Duration) (string, error) {
	if e.cfg.Nodes < 3 {
		return "", errors.New("kill-txn-coordinator needs 3 brokers")
	}
	adm, done, err := e.admin()
	if err != nil {
		return "", err
	}
	id := e.st.prefix + "dispatcher-0"
	resp := adm.FindTxnCoordinators(ctx, id)
	done()
	c, ok := resp[id]
	if !ok || c.Err != nil {
		return "", fmt.Errorf("transaction coordinator of %s: %w", id, c.Err)
	}
	node := int(c.NodeID) // kafka.sh: broker id i is node i
	e.mark()
	if err := e.cl.Kill9(ctx, node); err != nil {
		return "", err
	}
	err = sleep(ctx, down)
	if serr := e.cl.Start(context.WithoutCancel(ctx), node); serr != nil {
		return "", serr
	}
	return fmt.Sprintf("kill -9 broker %d (transaction coordinator of dispatcher-0), back %.0f s later", node, down.Seconds()), err
}

// stormFault is one fault the storm can draw: its name and how to run it
// for a drawn length.
type stormFault struct {
	name  string
	nodes int // brokers it needs (0: any)
	run   func(ctx context.Context, e *env, r *rand.Rand) (string, error)
}

var stormFaults = []stormFault{
	{name: "kill", run: func(ctx context.Context, e *env, r *rand.Rand) (string, error) {
		kind := []string{"dispatcher", "scheduler", "ingest"}[r.IntN(3)]
		i := r.IntN(2)
		return fmt.Sprintf("kill -9 %s-%d", kind, i), e.killRestart(ctx, kind, i)
	}},
	{name: "sigstop", run: func(ctx context.Context, e *env, r *rand.Rand) (string, error) {
		kind := []string{"dispatcher", "scheduler", "ingest"}[r.IntN(3)]
		return e.pause(ctx, kind, r.IntN(2), beyondSession)
	}},
	{name: "partition", run: func(ctx context.Context, e *env, r *rand.Rand) (string, error) {
		name := fmt.Sprintf("%s-%d", []string{"dispatcher", "scheduler", "ingest"}[r.IntN(3)], r.IntN(2))
		return e.partition(ctx, name, beyondSession)
	}},
	{name: "slow-link", run: func(ctx context.Context, e *env, r *rand.Rand) (string, error) {
		name := fmt.Sprintf("%s-%d", []string{"dispatcher", "scheduler", "ingest"}[r.IntN(3)], r.IntN(2))
		return e.slowLink(ctx, name, time.Duration(100+r.IntN(400))*time.Millisecond, 15*time.Second)
	}},
	{name: "bounce-leader", nodes: 3, run: func(ctx context.Context, e *env, _ *rand.Rand) (string, error) {
		return e.bounceLeader(ctx, 3*time.Second, 15*time.Second)
	}},
	{name: "kill-txn-coordinator", nodes: 3, run: func(ctx context.Context, e *env, _ *rand.Rand) (string, error) {
		return e.killTxnCoordinator(ctx, 10*time.Second)
	}},
}

// storm runs a seeded schedule of overlapping faults over the first
// 70% of the load: a fault starts every 3–8 s (drawn), each in its own
// goroutine, so several are under way at once; the last 30% of the load
// and the settle wait are the quiet period before the ledger is read.
// The same seed draws the same schedule (kinds, targets, start times,
// lengths); what the processes do under it is not replayable.
func storm(ctx context.Context, e *env) (string, error) {
	r := rand.New(rand.NewPCG(e.cfg.Seed, 23))
	var menu []stormFault
	for _, f := range stormFaults {
		if f.nodes == 0 || f.nodes <= e.cfg.Nodes {
			menu = append(menu, f)
		}
	}
	var (
		mu   sync.Mutex
		done []string
		errs []error
		wg   sync.WaitGroup
	)
	quiet := e.start.Add(time.Duration(0.7 * float64(e.cfg.Load)))
	busy := map[string]bool{} // fault kinds under way
	at := time.Duration(0)
	for {
		at += time.Duration(3000+r.IntN(5000)) * time.Millisecond
		if e.start.Add(at).After(quiet) {
			break
		}
		f := menu[r.IntN(len(menu))]
		sub := rand.New(rand.NewPCG(r.Uint64(), 0)) // the fault's own draws, fixed by the seed
		if err := sleep(ctx, time.Until(e.start.Add(at))); err != nil {
			return "", err
		}
		// Faults of different kinds overlap; two of one kind do not (a
		// second partition of a link would heal the first early).
		key := f.name
		mu.Lock()
		if busy[key] {
			mu.Unlock()
			continue
		}
		busy[key] = true
		mu.Unlock()
		start := time.Since(e.start)
		wg.Go(func() {
			what, err := f.run(ctx, e, sub)
			mu.Lock()
			defer mu.Unlock()
			busy[key] = false
			done = append(done, fmt.Sprintf("%03.0fs %s", start.Seconds(), what))
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", f.name, err))
			}
		})
	}
	wg.Wait()
	slices.Sort(done)
	return fmt.Sprintf("seed %d: %s", e.cfg.Seed, strings.Join(done, "; ")), errors.Join(errs...)
}
