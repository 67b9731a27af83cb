package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A frozen process expelled for its session comes back one of two ways
// in franz-go: its next heartbeat is answered UNKNOWN_MEMBER_ID (its
// partitions lost: the path every freeze took in the simulation before),
// or REBALANCE_IN_PROGRESS, when the group rebalances as it returns:
// franz-go joins again with its old member id, is told it is unknown,
// and joins as a new member keeping what it believed it owned (no loss;
// a revoke of what the new assignment lacks). The second is make sim
// seed 61's two terminal results (docs/DESIGN.md I47). So half of the
// dispatchers' freezes, and half of the scheduler's, end the second way:
// as the links thaw, the frozen member's next heartbeat is answered
// REBALANCE_IN_PROGRESS. And the scheduler freezes too: in half the
// seeds, once in the fault phase, for the session timeout plus 1-3 s.
// Both drawn from streams of their own, so the rest of a seed's schedule
// stays what it was.

// simClientID is the Kafka client id of a simulation process: the
// member ids kfake gives it start with it (a static member's, with its
// instance id), so a fault can pick one process's heartbeats.
func simClientID(name string) string { return "sim-" + name }

// drawRejoinOnThaw draws, in schedule order, whether a freeze ends with
// a rejoin rather than a loss.
func (w *simWorld) drawRejoinOnThaw() bool {
	if w.rejoinRng == nil {
		w.rejoinRng = rand.New(rand.NewPCG(w.seed, 0x7e7015))
	}
	return w.rejoinRng.IntN(2) == 0
}

// rejoinOnThaw answers the next heartbeat of the member whose client id
// is clientID (or whose instance id is instanceID) in group with
// REBALANCE_IN_PROGRESS: called just before its links thaw; kind is the
// fault's count.
func (w *simWorld) rejoinOnThaw(kind, group, clientID, instanceID, name string) {
	w.inject(kfake.Fault{Keys: []kmsg.Key{kmsg.Heartbeat}, Group: group, Err: kerr.RebalanceInProgress, Count: 1, TopLevel: true, When: func(r kmsg.Request) bool {
		hb, ok := r.(*kmsg.HeartbeatRequest)
		if !ok {
			return false
		}
		if instanceID != "" {
			return hb.InstanceID != nil && *hb.InstanceID == instanceID
		}
		return strings.HasPrefix(hb.MemberID, clientID+"-")
	}})
	w.t.Logf("fault: %s thaws into a rebalance (its old member rejoins as a new one, no loss)", name)
	w.count(kind, true)
}

// dispatcherInstance is slot n's static instance id ("" when the
// dispatchers are dynamic members).
func (w *simWorld) dispatcherInstance(n int) string {
	if w.dc.GroupInstanceID == "" {
		return ""
	}
	return fmt.Sprint(w.dc.GroupInstanceID, n)
}

// drawSchedulerPause gives half the seeds one freeze of the scheduler's
// Kafka links beyond its session.
func (w *simWorld) drawSchedulerPause(seed uint64) []simFault {
	r := rand.New(rand.NewPCG(seed, 0x5c4ed))
	if r.IntN(2) != 0 {
		return nil
	}
	at := time.Second + time.Duration(r.Int64N(int64(w.phase-2*time.Second)))
	d := simSession + time.Duration(1000+r.IntN(2000))*time.Millisecond
	rejoin := r.IntN(2) == 0
	return []simFault{{at: at, kind: "scheduler-pause", apply: func(ctx context.Context, w *simWorld) { w.pauseScheduler(ctx, d, rejoin) }}}
}

// pauseScheduler freezes the running scheduler's Kafka links for d; with
// rejoin, its thaw meets a rebalance.
func (w *simWorld) pauseScheduler(ctx context.Context, d time.Duration, rejoin bool) {
	w.mu.Lock()
	up := w.schedUp
	w.mu.Unlock()
	if !up {
		return
	}
	w.count("scheduler-pause", true)
	w.t.Logf("fault: the scheduler's Kafka links freeze for %v", d)
	w.schedFreeze.freeze()
	sleepUntil(ctx, time.Now().Add(d))
	if rejoin {
		w.rejoinOnThaw("scheduler-rejoin", w.sc.Group, simClientID("scheduler"), "", "the scheduler")
	}
	w.schedFreeze.thaw()
}
