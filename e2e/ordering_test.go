package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
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
	srv    *http.Server
	url    string
	remain int
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
		w.Header().Set("Retry-After", "90")
	}
	w.WriteHeader(code)
}

// TestOrderedPerKeyDeliversEachLaneInPublishOrder is ordered delivery
// end to end on kfake in virtual time (ingest, dispatcher, scheduler):
// an endpoint ordered per key gets 60 events over 4 keys with random
// transient failures (500, 429, 503 with Retry-After) and permanent
// ones (skipped: dead-lettered); each lane is delivered in publish
// order, each event attempted only after the one before it in its lane
// ended, and every delivery has exactly one terminal result. (No
// dispatcher restart: lane state is in memory only so far.)
func TestOrderedPerKeyDeliversEachLaneInPublishOrder(t *testing.T) {
	inVirtualTime(t, func(t *testing.T) {
		vs := startVirtual(t)
		defer vs.stop()
		vs.wait = 48 * time.Hour
		rng := rand.New(rand.NewPCG(7, 7))
		rx := &laneReceiver{plans: map[string][]int{}, tries: map[string]int{}, ended: map[string]bool{},
			order: map[string][]int{}, sizes: map[string]int{}, url: "http://127.0.0.1:8081/hooks"}
		ln, err := vs.vn.Listen("tcp", "127.0.0.1:8081")
		if err != nil {
			t.Fatal(err)
		}
		rx.srv = &http.Server{Handler: rx}
		go func() { _ = rx.srv.Serve(ln) }()
		defer rx.srv.Close()

		ep := vs.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.url, Ordering: hooklinev1.Ordering_ORDERING_PER_KEY,
			MaxInFlight: 4, RetryPolicy: ladderPolicy(8, time.Minute, 2*time.Minute)}).GetEndpoint()
		if ep.GetOrdering() != hooklinev1.Ordering_ORDERING_PER_KEY {
			t.Fatalf("endpoint ordering %v", ep.GetOrdering())
		}
		const events = 60
		rx.remain = events
		for range events {
			lane := fmt.Sprint("key-", rng.IntN(4))
			i := rx.sizes[lane]
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
			rx.mu.Lock()
			rx.plans[fmt.Sprint(lane, "/", i)] = plan
			rx.mu.Unlock()
			body, _ := json.Marshal(laneEvent{Lane: lane, I: i})
			if _, err := vs.events().PublishEvent(vs.ctx(), &hooklinev1.PublishEventRequest{EventType: "order.updated", Payload: body, OrderingKey: lane}); err != nil {
				t.Fatal(err)
			}
		}
		for waited := time.Duration(0); ; waited += time.Minute {
			rx.mu.Lock()
			remain := rx.remain
			rx.mu.Unlock()
			if remain == 0 {
				break
			}
			if waited > 24*time.Hour {
				t.Fatalf("%d events not ended after %v", remain, waited)
			}
			time.Sleep(time.Minute)
		}
		terminal := map[string]int{}
		for _, res := range decodeAll(t, vs.readFor(vs.topics.Results, 10*time.Minute), func() *hooklinev1.AttemptResult { return &hooklinev1.AttemptResult{} }) {
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
			if rx.tries[id] != len(plan) {
				t.Errorf("%s answered %d times, planned %d", id, rx.tries[id], len(plan))
			}
		}
	})
}
