package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/services/ingest/ingest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Endpoints created and deleted while events flow (issue 24 items 5 and
// 9's states, which no world had: every endpoint was created before the
// first publish and none was deleted).
//
//   - A late endpoint, ordered, created mid-run with a burst of events
//     published to it at once, while the endpoints topic's fetches fail
//     for a moment: the dispatchers read its first deliveries before
//     their endpoints view knows it, so they wait for the view in their
//     partition's resolver, and the burst's later members are read while
//     earlier ones still wait (O1 must hold: item 5; one resolver round
//     per partition whatever the backlog: item 9, which the memory
//     checker counts).
//   - A deleted endpoint: paused with events still published to it (a
//     backlog of held deliveries), then deleted. Every record of it read
//     afterwards names an endpoint the view no longer knows: it waits for
//     a sync and ends ENDPOINT_DELETED, one terminal result each.
//
// Each half of the seeds gets each, from a stream of their own, so every
// other draw of a seed stays what it was.

// awaitCreated waits until ep exists (an endpoint created mid-run); false
// when ctx ends first.
func (ep *simEndpoint) awaitCreated(ctx context.Context) bool {
	if ep.created == nil {
		return true
	}
	select {
	case <-ep.created:
		return true
	case <-ctx.Done():
		return false
	}
}

// drawLifecycle draws the seed's late and deleted endpoints, their
// members, and the faults that create, pause and delete them.
func (w *simWorld) drawLifecycle(seed uint64) []simFault {
	r := rand.New(rand.NewPCG(seed, 0x11fec1c1e))
	var out []simFault
	if r.IntN(2) == 0 {
		out = append(out, w.drawLateEndpoint(r))
	}
	if r.IntN(2) == 0 {
		out = append(out, w.drawDeletedEndpoint(r)...)
	}
	w.sortMembers()
	return out
}

// drawLateEndpoint adds an ordered endpoint created at a drawn moment and
// 12-30 members published to it from then on, 5-15 ms apart.
func (w *simWorld) drawLateEndpoint(r *rand.Rand) simFault {
	ep := &simEndpoint{name: fmt.Sprint("ep", len(w.eps), "late"), maxAttempts: uint32(3 + r.IntN(3)), created: make(chan struct{})}
	ep.ordering = hooklinev1.Ordering_ORDERING_PER_ENDPOINT
	if r.IntN(2) == 0 {
		ep.ordering = hooklinev1.Ordering_ORDERING_PER_KEY
		ep.keys = 2 + r.IntN(3)
		ep.maxInFlight = []uint32{2, 4}[r.IntN(2)]
	}
	ep.block = r.IntN(2) == 0
	w.eps = append(w.eps, ep)
	at := time.Second + time.Duration(r.Int64N(int64(w.phase/2)))
	limit := defaults[ingest.Config](w.t).MaxPayloadBytes
	gap := time.Duration(5+r.IntN(11)) * time.Millisecond
	n := 12 + r.IntN(19)
	for i := range n {
		m := &simMember{ep: ep, size: drawSize(r, limit), at: at + time.Duration(i)*gap}
		if ep.keys > 0 {
			m.key = fmt.Sprint("k", 1+r.IntN(ep.keys))
		}
		m.plan = drawPlan(r, ep.maxAttempts, m.size)
		w.members = append(w.members, m)
	}
	lag := 2 + r.IntN(4)
	w.t.Logf("seed %d: endpoint %s (%v, block %v) is created at +%v, %d events published to it %v apart; %d fetches of the endpoints topic fail then",
		w.seed, ep.name, ep.ordering, ep.block, at, n, gap, lag)
	return simFault{at: at, kind: "endpoint-create", apply: func(_ context.Context, w *simWorld) {
		w.inject(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: w.st.topics.Endpoints, Err: kerr.NotLeaderForPartition, Count: lag})
		if err := w.createEndpoint(ep); err != nil {
			w.t.Errorf("late endpoint: %v", err)
			return
		}
		close(ep.created)
		w.count("endpoint-create", false)
	}}
}

// drawDeletedEndpoint adds an unordered or per-key endpoint, created with
// the others, with a member every 30-80 ms until it is deleted; it is
// paused 1-3 s before (a backlog of held deliveries, each read again at
// its recheck) and deleted at a drawn moment of the fault phase.
func (w *simWorld) drawDeletedEndpoint(r *rand.Rand) []simFault {
	ep := &simEndpoint{name: fmt.Sprint("ep", len(w.eps), "deleted"), maxAttempts: uint32(3 + r.IntN(3)), maxInFlight: []uint32{2, 4, 10}[r.IntN(3)],
		ordering: hooklinev1.Ordering_ORDERING_UNORDERED}
	if r.IntN(2) == 0 {
		ep.ordering = hooklinev1.Ordering_ORDERING_PER_KEY
		ep.keys = 2 + r.IntN(3)
	}
	w.eps = append(w.eps, ep)
	del := w.phase/4 + time.Duration(r.Int64N(int64(w.phase/2)))
	pause := del - time.Second - time.Duration(r.Int64N(int64(2*time.Second)))
	gap := time.Duration(30+r.IntN(51)) * time.Millisecond
	n := 0
	for at := 500 * time.Millisecond; at < del; at += gap {
		m := &simMember{ep: ep, size: 256 + r.IntN(2<<10), at: at}
		if ep.keys > 0 {
			m.key = fmt.Sprint("k", 1+r.IntN(ep.keys))
		}
		m.plan = drawPlan(r, ep.maxAttempts, m.size)
		w.members = append(w.members, m)
		n++
	}
	w.t.Logf("seed %d: endpoint %s (%v) gets %d events %v apart, is paused at +%v and deleted at +%v", w.seed, ep.name, ep.ordering, n, gap, pause, del)
	return []simFault{
		{at: pause, kind: "endpoint-pause", apply: func(_ context.Context, w *simWorld) {
			w.count("endpoint-pause", false)
			if _, err := w.st.endpoints().PauseEndpoint(w.st.ctx(), &hooklinev1.PauseEndpointRequest{Id: ep.id, Reason: "sim: deleted soon"}); err != nil {
				w.t.Logf("pause %s: %v", ep.name, err)
			}
		}},
		{at: del, kind: "endpoint-delete", apply: func(_ context.Context, w *simWorld) {
			w.count("endpoint-delete", false)
			w.model.mu.Lock()
			ep.deletedAt = time.Now()
			w.model.mu.Unlock()
			if _, err := w.st.endpoints().DeleteEndpoint(w.st.ctx(), &hooklinev1.DeleteEndpointRequest{Id: ep.id}); err != nil {
				w.t.Errorf("delete %s: %v", ep.name, err)
				return
			}
			w.t.Logf("fault: %s deleted", ep.name)
		}},
	}
}

// endDeleted takes as ended, at their endpoint's deletion, the open
// members of deleted endpoints whose one terminal result says
// ENDPOINT_DELETED; it reads the results topic only when one such member
// is open.
func (w *simWorld) endDeleted(open []*simMember) {
	var waiting []*simMember
	w.model.mu.Lock()
	for _, m := range open {
		if !m.ep.deletedAt.IsZero() && m.ended.IsZero() {
			waiting = append(waiting, m)
		}
	}
	w.model.mu.Unlock()
	if len(waiting) == 0 {
		return
	}
	terminal := w.terminalStates()
	w.model.mu.Lock()
	defer w.model.mu.Unlock()
	n := 0
	for _, m := range waiting {
		if states := terminal[m.deliveryID]; len(states) == 1 && states[0] == hooklinev1.DeliveryState_DELIVERY_STATE_ENDPOINT_DELETED {
			m.ended, m.endpointDeleted = m.ep.deletedAt, true
			n++
		}
	}
	w.t.Logf("seed %d: %d of %d open deliveries of deleted endpoints ended ENDPOINT_DELETED", w.seed, n, len(waiting))
}
