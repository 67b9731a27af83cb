package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestOrderedLanesSurviveARestartWhoseLanesReadFails: the new owner of
// an ordered lane whose head is out on a retry cannot read the lanes
// topic at first (its first ListOffsets of it fail, and its lanes view
// reads nothing until they stop failing). It must wait for a successful
// read, not seed the lane from an empty view and let the head's
// followers overtake it (issue 24 item 2; on main the head went last:
// [1 2 3 4 0]).
func TestOrderedLanesSurviveARestartWhoseLanesReadFails(t *testing.T) {
	st, c := faultyStack(t)
	rx := &laneReceiver{plans: map[string][]int{}, tries: map[string]int{}, ended: map[string]bool{},
		order: map[string][]int{}, sizes: map[string]int{}, retryAfter: "10", restarted: true}
	var evs []laneEvent
	for i := range 5 {
		plan := []int{http.StatusOK}
		if i == 0 {
			plan = []int{http.StatusServiceUnavailable, http.StatusOK} // out for 10 s
		}
		rx.plans[fmt.Sprint("L/", i)] = plan
		evs = append(evs, laneEvent{Lane: "L", I: i})
	}
	rx.remain = len(evs)
	srv := httptest.NewServer(rx)
	defer srv.Close()
	st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: srv.URL + "/hooks", Ordering: hooklinev1.Ordering_ORDERING_PER_ENDPOINT,
		RetryPolicy: ladderPolicy(8, time.Second), OutageModeDisabled: true})
	publishLanes(t, st, evs)
	st.readN(st.topics.Retries, 1) // the head's retry is committed; its followers wait
	st.dispatcher.halt()

	const failing = 3
	listed := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ListOffsets}, Topic: st.topics.Lanes, Err: kerr.TopicAuthorizationFailed, Count: failing,
		When: listsEnds}) // a sync of the view, not its consumer's start

	held := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: st.topics.Lanes, Err: kerr.NotLeaderForPartition, Count: -1})
	go func() {
		if listed.Wait(st.failed, failing) == nil {
			held.Remove() // the lanes topic is readable again
		}
	}()
	t.Cleanup(held.Remove)
	st.dispatcher.start(st, st.newDispatcher(time.Millisecond).Run)

	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(waitFor)
	for rx.left() > 0 {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%d events not ended within %v", rx.left(), waitFor)
		}
	}
	rx.check(t, st.terminalResults(len(evs)), len(evs))
	rx.mu.Lock()
	defer rx.mu.Unlock()
	if fmt.Sprint(rx.order["L"]) != "[0 1 2 3 4]" {
		t.Errorf("delivered in the order %v, want [0 1 2 3 4]", rx.order["L"])
	}
}

// TestAnAbortedCommitWaitsForTheLanesItCommitted: the lane's head went
// out on a retry (committed; the lanes view read it), came back and was
// delivered with its followers (committed: the lane is empty again, a
// lanes record this dispatcher's view cannot read yet). Then a commit
// aborts and the window starts over. The next member must wait for a read
// of the lanes view that holds what was committed, not be seeded from the
// lagging view, which still lists the head outside: on main it waited
// for it for ever (issue 24 item 2: the 204 ordered deliveries a broker
// kill left unfinished).
func TestAnAbortedCommitWaitsForTheLanesItCommitted(t *testing.T) {
	st, c := faultyStack(t)
	rx := &laneReceiver{plans: map[string][]int{}, tries: map[string]int{}, ended: map[string]bool{},
		order: map[string][]int{}, sizes: map[string]int{}, retryAfter: "1", restarted: true}
	var evs []laneEvent
	for i := range 6 {
		plan := []int{http.StatusOK}
		if i == 0 {
			plan = []int{http.StatusServiceUnavailable, http.StatusOK} // out for 1 s
		}
		rx.plans[fmt.Sprint("L/", i)] = plan
		evs = append(evs, laneEvent{Lane: "L", I: i})
	}
	rx.remain = len(evs)
	srv := httptest.NewServer(rx)
	defer srv.Close()
	// The lanes view reads the lane's first record (offset 0, its
	// commit marker at 1) and nothing after it until released.
	held := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: st.topics.Lanes, Err: kerr.NotLeaderForPartition, Count: -1,
		When: func(r kmsg.Request) bool {
			req, ok := r.(*kmsg.FetchRequest)
			if !ok {
				return false
			}
			for _, t := range req.Topics {
				for _, p := range t.Partitions {
					if p.FetchOffset >= 2 {
						return true
					}
				}
			}
			return false
		}})
	t.Cleanup(held.Remove)
	st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: srv.URL + "/hooks", Ordering: hooklinev1.Ordering_ORDERING_PER_ENDPOINT,
		RetryPolicy: ladderPolicy(8, time.Second), OutageModeDisabled: true})
	publishLanes(t, st, evs[:5])
	st.terminalResults(5) // committed, the head's return included

	// The next commit aborts (its results are refused once).
	refused := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: st.topics.Results, Err: kerr.TopicAuthorizationFailed, Count: 1})
	go func() {
		if refused.Wait(st.failed, 1) != nil {
			return
		}
		// The lanes topic is readable again once the dispatcher asks
		// for its ends a second time after the abort: a dispatcher
		// that retries its read gets there; one that gives up on it
		// at its bound and seeds the lanes from the view never asks
		// again.
		asked := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ListOffsets}, Topic: st.topics.Lanes, Observe: true, Count: -1, When: listsEnds})
		defer asked.Remove()
		if asked.Wait(st.failed, 2) == nil {
			held.Remove()
		}
	}()
	publishLanes(t, st, evs[5:])
	st.terminalResults(6)
	rx.check(t, st.terminalResults(len(evs)), len(evs))
}

// listsEnds reports whether r lists end offsets (a view's sync), not
// start offsets (a consumer starting from the beginning).
func listsEnds(r kmsg.Request) bool {
	req, ok := r.(*kmsg.ListOffsetsRequest)
	if !ok {
		return false
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			if p.Timestamp == -1 {
				return true
			}
		}
	}
	return false
}
