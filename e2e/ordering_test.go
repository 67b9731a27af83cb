package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/kafkatest"
)

// laneReceiver answers each event by a plan fixed before it is published
// and checks, at every request, that every event published before it in
// its lane has had its terminal answer (2xx or permanent).
type laneReceiver struct {
	mu     sync.Mutex
	plans  map[string][]int // "lane/i" → status codes in order
	tries  map[string]int
	ended  map[string]bool
	order  map[string][]int // lane → i in the order delivered
	sizes  map[string]int   // lane → events published
	bad    []string
	remain int
	// retryAfter is the Retry-After a 503 carries.
	retryAfter string
	// restarted: the dispatcher was replaced, attempts may repeat.
	restarted bool
}

type laneEvent struct {
	Lane string `json:"lane"`
	I    int    `json:"i"`
}

func (rx *laneReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var ev laneEvent
	_ = json.Unmarshal(raw, &ev)
	id := fmt.Sprint(ev.Lane, "/", ev.I)
	rx.mu.Lock()
	for j := range ev.I {
		if !rx.ended[fmt.Sprint(ev.Lane, "/", j)] {
			rx.bad = append(rx.bad, fmt.Sprintf("%s attempted before %s/%d ended", id, ev.Lane, j))
		}
	}
	plan := rx.plans[id]
	n := rx.tries[id]
	rx.tries[id]++
	code := plan[min(n, len(plan)-1)]
	if (code == http.StatusOK || code == http.StatusBadRequest) && !rx.ended[id] {
		rx.ended[id] = true
		rx.remain--
		if code == http.StatusOK {
			rx.order[ev.Lane] = append(rx.order[ev.Lane], ev.I)
		}
	}
	rx.mu.Unlock()
	if code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", rx.retryAfter)
	}
	w.WriteHeader(code)
}

// newLaneReceiver plans the answers to events events over keys keys:
// random transient failures (500, 429, 503 with Retry-After: retryAfter)
// and some permanent ones (400), each event ending in a 200 or a 400.
func newLaneReceiver(seed uint64, events, keys int, retryAfter string) (*laneReceiver, []laneEvent) {
	rng := rand.New(rand.NewPCG(seed, seed))
	rx := &laneReceiver{plans: map[string][]int{}, tries: map[string]int{}, ended: map[string]bool{},
		order: map[string][]int{}, sizes: map[string]int{}, remain: events, retryAfter: retryAfter}
	var evs []laneEvent
	for range events {
		lane := fmt.Sprint("key-", rng.IntN(keys))
		ev := laneEvent{Lane: lane, I: rx.sizes[lane]}
		rx.sizes[lane]++
		var plan []int
		for rng.IntN(3) == 0 && len(plan) < 3 {
			plan = append(plan, []int{http.StatusInternalServerError, http.StatusTooManyRequests, http.StatusServiceUnavailable}[rng.IntN(3)])
		}
		if rng.IntN(8) == 0 {
			plan = append(plan, http.StatusBadRequest)
		} else {
			plan = append(plan, http.StatusOK)
		}
		rx.plans[fmt.Sprint(lane, "/", ev.I)] = plan
		evs = append(evs, ev)
	}
	return rx, evs
}

// publishLanes publishes evs to the endpoint ordered per key, each with
// its lane as the ordering key.
func publishLanes(t *testing.T, st *stack, evs []laneEvent) {
	t.Helper()
	for _, ev := range evs {
		body, _ := json.Marshal(ev)
		if _, err := st.events().PublishEvent(st.ctx(), &hooklinev1.PublishEventRequest{EventType: "order.updated", Payload: body, OrderingKey: ev.Lane}); err != nil {
			t.Fatal(err)
		}
	}
}

func (rx *laneReceiver) left() int {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	return rx.remain
}

// check asserts the lanes' order, the plans played out, and one terminal
// result per delivery among results.
func (rx *laneReceiver) check(t *testing.T, results []*hooklinev1.AttemptResult, events int) {
	t.Helper()
	terminal := map[string]int{}
	for _, res := range results {
		switch res.GetState() {
		case hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED, hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, hooklinev1.DeliveryState_DELIVERY_STATE_EXPIRED:
			terminal[res.GetDeliveryId()]++
		}
	}
	rx.mu.Lock()
	defer rx.mu.Unlock()
	for _, b := range rx.bad {
		t.Error(b)
	}
	if len(terminal) != events {
		t.Errorf("%d deliveries with a terminal result, want %d", len(terminal), events)
	}
	for id, n := range terminal {
		if n != 1 {
			t.Errorf("%s has %d terminal results", id, n)
		}
	}
	for lane, seq := range rx.order {
		for i := 1; i < len(seq); i++ {
			if seq[i] <= seq[i-1] {
				t.Errorf("lane %s delivered out of order: %v", lane, seq)
				break
			}
		}
	}
	for id, plan := range rx.plans {
		// After a restart an attempt whose outcome was not committed is
		// made again (receivers deduplicate on webhook-id).
		if n := rx.tries[id]; n < len(plan) || (n > len(plan) && !rx.restarted) {
			t.Errorf("%s answered %d times, planned %d", id, n, len(plan))
		}
	}
}

func newResult() *hooklinev1.AttemptResult { return &hooklinev1.AttemptResult{} }

// TestOrderedPerKeyDeliversEachLaneInPublishOrder is ordered delivery
// end to end on kfake in virtual time (ingest, dispatcher, scheduler):
// an endpoint ordered per key gets 60 events over 4 keys with random
// transient failures (500, 429, 503 with Retry-After) and permanent
// ones (skipped: dead-lettered); each lane is delivered in publish
// order, each event attempted only after the one before it in its lane
// ended, and every delivery has exactly one terminal result. (The
// restart is in TestOrderedPerKeyInRealTime and
// TestOrderedLanesSurviveADispatcherRestart.)
func TestOrderedPerKeyDeliversEachLaneInPublishOrder(t *testing.T) {
	inVirtualTime(t, func(t *testing.T) {
		vs := startVirtual(t)
		defer vs.stop()
		vs.wait = 48 * time.Hour
		const events = 60
		rx, evs := newLaneReceiver(7, events, 4, "90")
		ln, err := vs.vn.Listen("tcp", "127.0.0.1:8081")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: rx}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()

		ep := vs.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: "http://127.0.0.1:8081/hooks", Ordering: hooklinev1.Ordering_ORDERING_PER_KEY,
			MaxInFlight: 4, RetryPolicy: ladderPolicy(8, time.Minute, 2*time.Minute)}).GetEndpoint()
		if ep.GetOrdering() != hooklinev1.Ordering_ORDERING_PER_KEY {
			t.Fatalf("endpoint ordering %v", ep.GetOrdering())
		}
		publishLanes(t, vs.stack, evs)
		for waited := time.Duration(0); rx.left() > 0; waited += time.Minute {
			if waited > 24*time.Hour {
				t.Fatalf("%d events not ended after %v", rx.left(), waited)
			}
			time.Sleep(time.Minute) // virtual time: a wait on the receiver's state
		}
		rx.check(t, kafkatest.Decode(t, vs.readFor(vs.topics.Results, 10*time.Minute), newResult), events)
	})
}

// TestOrderedPerKeyInRealTime is the same in real time, smaller (20
// events over 3 keys, 1 s retries), so that it runs on Apache Kafka too,
// with the dispatcher replaced once a third of the events ended.
func TestOrderedPerKeyInRealTime(t *testing.T) {
	st := startStack(t)
	const events = 20
	rx, evs := newLaneReceiver(3, events, 3, "1")
	srv := httptest.NewServer(rx)
	defer srv.Close()
	st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: srv.URL + "/hooks", Ordering: hooklinev1.Ordering_ORDERING_PER_KEY,
		MaxInFlight: 4, RetryPolicy: ladderPolicy(8, time.Second), OutageModeDisabled: true}) // only attempts make results
	publishLanes(t, st, evs)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(waitFor)
	restarted := false
	for rx.left() > 0 {
		if !restarted && rx.left() <= events*2/3 {
			// A third ended: the dispatcher is replaced mid-way; the new
			// one seeds the lanes from the lanes topic.
			st.dispatcher.halt()
			st.dispatcher.start(st, st.newDispatcher(time.Millisecond).Run)
			restarted = true
			rx.mu.Lock()
			rx.restarted = true
			rx.mu.Unlock()
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%d events not ended within %v", rx.left(), waitFor)
		}
	}
	rx.check(t, st.terminalResults(events), events)
}

// terminalResults reads the results topic until n deliveries have a
// terminal result (and what came with them), bounded by waitFor.
func (st *stack) terminalResults(n int) []*hooklinev1.AttemptResult {
	st.t.Helper()
	cl := st.reader(st.topics.Results)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(st.failed, waitFor)
	defer cancel()
	var out []*hooklinev1.AttemptResult
	ended := map[string]bool{}
	for len(ended) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			st.t.Fatalf("%d deliveries with a terminal result, want %d", len(ended), n)
		}
		for _, res := range kafkatest.Decode(st.t, fs.Records(), newResult) {
			out = append(out, res)
			switch res.GetState() {
			case hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED, hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, hooklinev1.DeliveryState_DELIVERY_STATE_EXPIRED:
				ended[res.GetDeliveryId()] = true
			}
		}
	}
	return out
}

// TestOrderedLanesSurviveADispatcherRestart replaces the dispatcher
// while a lane's head is out on a retry and its followers wait in
// memory: the new dispatcher, which reads the followers again from the
// committed offsets, must learn from the lanes topic that the head is
// outside and keep them waiting for it. (Without the lanes topic the
// followers went first: delivered [1 2 3 4 0].)
func TestOrderedLanesSurviveADispatcherRestart(t *testing.T) {
	st := startStack(t)
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
