package e2e

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAStoppingDispatcherWhoseCommitsAbortStops (the stop-abort defect):
// the dispatcher's commits abort the way a rebalance aborts them (the
// offset commit answered REBALANCE_IN_PROGRESS) and it is stopped with
// completed work it could not commit. A stopping loop does not back off
// (its context is over), so the work it kept after an abort was
// committed and aborted again at once, for ever: the stop never ended
// (found by TestOrderedDeliveryProperty with
// HOOKLINE_ORDERING_SEED=1796169276472578075, which hung at its crash
// halt after 238,836 aborted commits). The stopping dispatcher must drop
// what did not commit and stop, and the next owner must deliver it, each
// delivery ending once.
func TestAStoppingDispatcherWhoseCommitsAbortStops(t *testing.T) {
	st, c := faultyStack(t)
	bodies := &bodyCounter{posts: map[string]int{}}
	srv := httptest.NewServer(bodies)
	defer srv.Close()
	st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: srv.URL + "/hooks"})
	group := st.kafka.TopicPrefix + "dispatcher"
	aborts := c.Fault(kfake.Fault{
		Keys:  []kmsg.Key{kmsg.TxnOffsetCommit},
		Err:   kerr.RebalanceInProgress,
		Count: -1,
		When: func(r kmsg.Request) bool {
			req, ok := r.(*kmsg.TxnOffsetCommitRequest)
			return ok && req.Group == group
		},
	})
	defer aborts.Remove()
	// Every transaction the dispatcher ends, committed or aborted.
	txn := st.kafka.TopicPrefix + "dispatcher-1"
	ofDispatcher := func(r kmsg.Request) bool {
		req, ok := r.(*kmsg.EndTxnRequest)
		return ok && req.TransactionalID == txn
	}
	ends := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Observe: true, Count: -1, When: ofDispatcher})
	defer ends.Remove()
	// fenceOut ends a dispatcher that does not stop by itself: its next
	// end is answered as fenced, which fails its session (a failing test
	// must not hang in its cleanup).
	fenceOut := func() {
		c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.InvalidProducerEpoch, TopLevel: true, Count: -1, When: ofDispatcher})
	}
	const events = 5
	for i := range events {
		body, _ := json.Marshal(laneEvent{"x", i})
		if _, err := st.events().PublishEvent(st.ctx(), &hooklinev1.PublishEventRequest{EventType: "a.b", Payload: body}); err != nil {
			t.Fatal(err)
		}
	}
	// What was POSTed is done and cannot commit: after the first abort
	// the dispatcher keeps it for the next commit and starts nothing
	// new until that lands.
	ctx, cancel := context.WithTimeout(st.failed, waitFor)
	defer cancel()
	if err := aborts.Wait(ctx, 1); err != nil {
		t.Fatalf("the dispatcher's commits did not abort: %v", err)
	}
	st.until("a delivery POSTed", func() bool { d, _ := bodies.counts(); return d > 0 })

	// Stop it while its completed work is uncommitted.
	before := ends.Hits()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		st.dispatcher.halt()
	}()
	// A stopping dispatcher ends a transaction or two; one that commits
	// and aborts again at once ends thousands.
	const spinning = 50
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(waitFor)
	for waiting := true; waiting; {
		select {
		case <-stopped:
			waiting = false
		case <-tick.C:
			if n := ends.Hits() - before; n > spinning {
				fenceOut()
				<-stopped
				t.Fatalf("the stopping dispatcher ended %d transactions and did not stop: the work it kept after an abort was committed and aborted again at once", n)
			}
		case <-deadline:
			fenceOut()
			<-stopped
			t.Fatalf("the dispatcher did not stop within %v (%d transactions ended while stopping)", waitFor, ends.Hits()-before)
		}
	}
	if n := ends.Hits() - before; n > 2 {
		t.Errorf("the stopping dispatcher ended %d transactions; want at most the one in flight and its last", n)
	}

	// The next owner delivers what did not commit, each delivery once.
	aborts.Remove()
	st.dispatcher.start(st, st.newDispatcher(time.Millisecond).Run)
	results := st.terminalResults(events)
	ended := map[string]int{}
	for _, r := range results {
		if r.GetState() == hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED {
			ended[r.GetDeliveryId()]++
		}
	}
	if len(ended) != events {
		t.Fatalf("%d deliveries delivered, want %d", len(ended), events)
	}
	for id, n := range ended {
		if n != 1 {
			t.Errorf("%s: %d delivered results, want 1", id, n)
		}
	}
	if _, total := bodies.counts(); total < events {
		t.Errorf("%d POSTs for %d deliveries", total, events)
	}
}
