package dispatcher

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/hookline/hookline/platform/endpoints"
	"github.com/hookline/hookline/services/dispatcher/health"
	"github.com/twmb/franz-go/pkg/kgo"
)

// An automatic pause (R-RECV-4) is an endpoints record written inside
// the transaction of the attempt that reached the threshold. It is never
// applied to the local view ahead of the log: if the transaction aborts,
// nothing was paused anywhere. Once committed, the view learns the pause
// from the log like every other reader. Writes of the endpoints topic are
// conditional, so the pause can also lose to a change of the same
// version written concurrently (an operator's update, say); then it is
// as if it never happened. In both cases the endpoint is re-armed: the
// next permanent failure of its streak pauses it again, from the
// endpoint's state at that time (a deleted or paused endpoint is not
// attempted, so it is never paused twice). If the concurrent change
// fixed the endpoint, no failure follows and no pause either. An entry
// whose outputs hold a pause and that is dropped before any commit takes
// it (revoke, loss, an aborted commit's rewind, the drain deadline)
// re-arms its endpoint the same way (pendingPauses.dropped): every pause is
// settled, committed or not, and none is tracked for ever.

// pausePendingRecheck is how often a lane whose endpoint's automatic
// pause is pending looks at it again (place.go).
const pausePendingRecheck = 50 * time.Millisecond

// pendingPauses are the automatic pauses written but not yet settled, by
// write id, and what settling one needs: the endpoints view that tracks
// a write's outcome, the endpoints topic, the endpoint health it re-arms.
// Safe for concurrent use.
type pendingPauses struct {
	store *endpoints.Store
	topic string // the endpoints topic
	rcv   *health.Receivers
	log   *slog.Logger
	// outcome waits for a committed pause's outcome (tests replace it).
	outcome func(context.Context, *endpoints.Tracked, *kgo.Record) (endpoints.Outcome, error)

	mu sync.Mutex
	m  map[string]pendingPause
	wg sync.WaitGroup // outcome watchers
}

type pendingPause struct {
	endpoint string
	tracked  *endpoints.Tracked
}

// track registers r, the endpoints record pausing endpoint id, for
// settling after its commit.
func (p *pendingPauses) track(id string, r *kgo.Record) {
	t := p.store.Track(r)
	p.mu.Lock()
	if p.m == nil {
		p.m = map[string]pendingPause{}
	}
	p.m[t.ID()] = pendingPause{endpoint: id, tracked: t}
	p.mu.Unlock()
}

// committed settles the automatic pauses among a commit's records:
// an aborted one re-arms its endpoint at once; a committed one is
// watched until the view has read it, and re-arms its endpoint if it
// lost. Called by the commit after its transaction ends.
func (p *pendingPauses) committed(ctx context.Context, recs []*kgo.Record, committed bool) {
	p.mu.Lock()
	if len(p.m) == 0 {
		p.mu.Unlock()
		return
	}
	var mine []*kgo.Record
	var pending []pendingPause
	for _, r := range recs {
		if r.Topic != p.topic {
			continue
		}
		id := endpoints.TrackedID(r)
		if pp, ok := p.m[id]; ok {
			delete(p.m, id)
			mine, pending = append(mine, r), append(pending, pp)
		}
	}
	p.mu.Unlock()
	for i, pp := range pending {
		if !committed {
			pp.tracked.Forget()
			p.rcv.Rearm(pp.endpoint)
			continue
		}
		r := mine[i]
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			o, err := p.outcome(ctx, pp.tracked, r)
			switch {
			case err != nil:
				// Stopping, or the view did not read it in time: the
				// pause may have taken effect (the view will say so);
				// re-armed, so its lane does not wait for it for ever
				// (a second pause, written from the version the first
				// replaced, would lose harmlessly).
				p.log.Warn("automatic pause written; its outcome is unknown", "endpoint_id", pp.endpoint, "err", err)
				p.rcv.Rearm(pp.endpoint)
			case o != endpoints.Won:
				p.log.Warn("automatic pause lost to a concurrent change of the endpoint; the next permanent failure pauses it again", "endpoint_id", pp.endpoint)
				p.rcv.Rearm(pp.endpoint)
			}
		}()
	}
}

// dropped settles the automatic pauses among outputs that will
// never be committed: their entry was dropped from the window (its
// partition revoked or lost, the window rewound after an aborted
// commit, the loop stopped with them uncommitted) or its attempt
// reported after its partition was dropped. Nothing was paused, so each
// endpoint is re-armed and its tracking forgotten, as for an aborted
// transaction. Called by the loop wherever it drops outputs.
func (p *pendingPauses) dropped(outs []*kgo.Record) {
	p.committed(context.Background(), outs, false)
}

// reset forgets the automatic pauses not settled yet (a new session:
// freshSession). An earlier session settles every pause it wrote before
// it ends (committed, dropped), so there are none unless one
// slipped through; a pause that did commit reaches the endpoints view
// like any other write.
func (p *pendingPauses) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pp := range p.m {
		pp.tracked.Forget()
	}
	clear(p.m)
}

// defaultPauseOutcome waits for a committed automatic pause's outcome.
func defaultPauseOutcome(ctx context.Context, t *endpoints.Tracked, r *kgo.Record) (endpoints.Outcome, error) {
	return t.Outcome(ctx, r)
}
