package e2e

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// drawGroupLost gives half the seeds one moment where every dispatcher's
// group session fails at once, as when the group's coordinator dies (the
// chaos storm's coordinator kill): each member's next heartbeat is
// answered REBALANCE_IN_PROGRESS and its join then fails, so franz-go
// ends the session, calls OnPartitionsLost and joins again owning
// nothing. Each dispatcher's join then asks for the partitions it lost
// back (services/dispatcher/dispatcher/synced.go); what the model checks
// is that nothing stalls or is attempted by two owners across it. Drawn
// from a stream of its own so the rest of a seed's schedule stays what
// it was.
func (w *simWorld) drawGroupLost(seed uint64) []simFault {
	r := rand.New(rand.NewPCG(seed, 0x6e0105e))
	if r.IntN(2) != 0 {
		return nil
	}
	at := time.Second + time.Duration(r.Int64N(int64(w.phase-2*time.Second)))
	return []simFault{{at: at, kind: "group-lost", apply: func(_ context.Context, w *simWorld) {
		members := 3 // at most three dispatchers run; a fault left over fails nothing more than one extra join
		w.inject(kfake.Fault{Keys: []kmsg.Key{kmsg.Heartbeat}, Group: w.dc.Group, Err: kerr.RebalanceInProgress, Count: members, TopLevel: true})
		w.inject(kfake.Fault{Keys: []kmsg.Key{kmsg.JoinGroup}, Group: w.dc.Group, Err: kerr.UnknownServerError, Count: members, TopLevel: true})
		w.model.ownershipMayChange(simSession + 5*time.Second)
		w.t.Log("fault: every dispatcher's group session fails (its partitions lost)")
		w.count("group-lost", true)
	}}}
}

// drawJournal gives half the seeds' dispatchers an answers journal
// (--answers-dir, one directory per slot, kept across its crashes and
// restarts): a dispatcher that crashes and takes its partitions back
// settles what its receivers answered from the journal. The model's
// rules hold either way; what the seeds exercise is the journal's state
// (answers read back, forgotten at an assignment, segments released)
// under every other fault. Drawn from a stream of its own.
func (w *simWorld) drawJournal(seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0xa115e75))
	if r.IntN(2) != 0 {
		return
	}
	w.dc.AnswersDir = w.t.TempDir()
	w.t.Logf("seed %d: the dispatchers journal their answers", w.seed)
}
