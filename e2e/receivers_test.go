package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/kafkatest"
	"google.golang.org/protobuf/types/known/durationpb"
)

// countingReceiver answers 200 after work, and records how many requests
// it had in flight at most, and when each arrived by event id.
type countingReceiver struct {
	*httptest.Server
	inFlight, maxInFlight atomic.Int32
	mu                    sync.Mutex
	arrived               map[string][]time.Time
	order                 []time.Time
	// arrival is closed and replaced at every arrival.
	arrival chan struct{}
}

func newCountingReceiver(t *testing.T, work time.Duration) *countingReceiver {
	rx := &countingReceiver{arrived: map[string][]time.Time{}, arrival: make(chan struct{})}
	rx.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		n := rx.inFlight.Add(1)
		for {
			m := rx.maxInFlight.Load()
			if n <= m || rx.maxInFlight.CompareAndSwap(m, n) {
				break
			}
		}
		rx.mu.Lock()
		id := r.Header.Get("webhook-id")
		rx.arrived[id] = append(rx.arrived[id], now)
		rx.order = append(rx.order, now)
		close(rx.arrival)
		rx.arrival = make(chan struct{})
		rx.mu.Unlock()
		if work > 0 {
			t := time.NewTimer(work) // the receiver's own work, not a wait in the test
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
			}
		}
		rx.inFlight.Add(-1)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rx.Close)
	return rx
}

func (st *stack) deliveredAll(n int) []*hooklinev1.AttemptResult {
	st.t.Helper()
	res := kafkatest.Decode(st.t, st.readN(st.topics.Results, n), func() *hooklinev1.AttemptResult { return &hooklinev1.AttemptResult{} })
	for _, r := range res {
		if r.GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED || r.GetAttempt() != 1 {
			st.t.Fatalf("want every delivery delivered at attempt 1 (waiting burns no attempt), got %v", r)
		}
	}
	return res
}

func TestConcurrencyCapIsNeverExceeded(t *testing.T) {
	st := startStack(t)
	rx := newCountingReceiver(t, 150*time.Millisecond)
	st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, MaxInFlight: 3, RateLimitPerSecond: 1000})
	const n = 24
	for range n {
		st.publish("invoice.paid", `{}`)
	}
	st.deliveredAll(n)
	if m := rx.maxInFlight.Load(); m > 3 {
		t.Fatalf("receiver saw %d requests in flight, cap is 3", m)
	}
	rx.mu.Lock()
	defer rx.mu.Unlock()
	if len(rx.arrived) != n {
		t.Fatalf("receiver got %d distinct events, want %d", len(rx.arrived), n)
	}
}

func TestRateLimitIsNeverExceeded(t *testing.T) {
	st := startStack(t)
	rx := newCountingReceiver(t, 0)
	st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, RateLimitPerSecond: 5})
	const n = 20
	for range n {
		st.publish("invoice.paid", `{}`)
	}
	st.deliveredAll(n)
	rx.mu.Lock()
	defer rx.mu.Unlock()
	at := slices.Clone(rx.order)
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	for i := range at {
		k := 0
		for j := i; j < len(at) && at[j].Sub(at[i]) < time.Second; j++ {
			k++
		}
		if k > 6 {
			t.Fatalf("%d requests within one second (limit 5/s, +1 burst)", k)
		}
	}
}

// TestSickReceiverDoesNotSlowHealthyOnes: healthy endpoints' deliveries
// are not queued behind one endpoint that never answers. The sick
// endpoint's attempts hang until its 60 s timeout; every healthy
// delivery published beside them must arrive while all of those
// attempts are still hanging — had any healthy delivery waited for a
// sick attempt to end, it could only arrive after one ended. (A
// condition, not a latency ratio: the ratio of p99s, which this test
// used to assert, swung with the machine's load; the latencies are
// logged, and the speed figures live in make bench's isolation row.)
func TestSickReceiverDoesNotSlowHealthyOnes(t *testing.T) {
	st := startStack(t)
	const healthy, rounds = 20, 15
	rx := newCountingReceiver(t, 0)
	var ids []string
	for range healthy {
		ids = append(ids, st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, EventTypes: []string{"healthy.*"}}).GetEndpoint().GetId())
	}
	hang := make(chan struct{})
	var sickStarted, sickEnded atomic.Int64
	sick := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sickStarted.Add(1)
		defer sickEnded.Add(1)
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer sick.Close()
	defer close(hang)

	// publish sends rounds of one event to every healthy endpoint (and,
	// withSick, one to the sick endpoint) and waits until every healthy
	// event arrived; it returns the healthy p99, publish to receipt.
	publish := func(withSick bool) time.Duration {
		var lat []time.Duration
		sent := map[string]time.Time{}
		for range rounds {
			for _, id := range ids {
				start := time.Now()
				resp, err := st.events().PublishEvent(st.ctx(), &hooklinev1.PublishEventRequest{EventType: "healthy.tick", Payload: []byte(`{}`), EndpointIds: []string{id}})
				if err != nil {
					t.Fatal(err)
				}
				sent[resp.GetEventId()] = start
			}
			if withSick {
				st.publish("sick.tick", `{}`)
			}
			// Pace the load: one round every 50 ms, about 400 events/s.
			next := time.NewTimer(50 * time.Millisecond)
			<-next.C
		}
		ctx, cancel := context.WithTimeout(t.Context(), waitFor)
		defer cancel()
		for {
			rx.mu.Lock()
			next := rx.arrival
			got := 0
			for id := range sent {
				if len(rx.arrived[id]) > 0 {
					got++
				}
			}
			if got == len(sent) {
				for id, s := range sent {
					lat = append(lat, rx.arrived[id][0].Sub(s))
				}
				rx.mu.Unlock()
				break
			}
			rx.mu.Unlock()
			select {
			case <-ctx.Done():
				t.Fatalf("only %d of %d healthy deliveries arrived", got, len(sent))
			case <-next:
			}
		}
		slices.Sort(lat)
		return lat[len(lat)*99/100]
	}
	base := publish(false)
	st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: sick.URL, EventTypes: []string{"sick.*"}, Timeout: durationpb.New(60 * time.Second)})
	withSick := publish(true)
	started, ended := sickStarted.Load(), sickEnded.Load()
	t.Logf("healthy p99: %v alone, %v beside a hanging receiver (%d sick attempts hanging)", base, withSick, started-ended)
	if started == 0 {
		t.Fatal("the sick receiver was never attempted: the test proves nothing")
	}
	if ended != 0 {
		t.Fatalf("%d of %d sick attempts ended before every healthy delivery arrived: healthy deliveries may have waited for them", ended, started)
	}
}

// TestDispatcherCrashWithOutOfOrderCompletionsLosesNothing stops the
// dispatcher abruptly (no drain) while slow attempts are in flight and
// later deliveries in the same partitions have already completed above
// them; after a restart every delivery has exactly one result.
func TestDispatcherCrashWithOutOfOrderCompletionsLosesNothing(t *testing.T) {
	st := startStack(t)
	// Restart the dispatcher with no drain, so stopping it abandons what
	// is in flight, as a crash would.
	st.dispatcher.halt()
	st.dispatcher.start(st, st.newDispatcher(time.Millisecond).Run)

	slow := newCountingReceiver(t, 1500*time.Millisecond)
	fast := newCountingReceiver(t, 0)
	var slowIDs, fastIDs []string
	for range 3 {
		slowIDs = append(slowIDs, st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: slow.URL, EventTypes: []string{"slow.*"}}).GetEndpoint().GetId())
		fastIDs = append(fastIDs, st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: fast.URL, EventTypes: []string{"fast.*"}}).GetEndpoint().GetId())
	}
	const rounds = 4
	for range rounds {
		st.publish("slow.tick", `{}`) // 3 deliveries, one per slow endpoint
		st.publish("fast.tick", `{}`)
	}
	want := rounds * (len(slowIDs) + len(fastIDs))
	// Crash once every fast delivery has been made while slow ones are
	// still in flight (completed above them in the same partitions).
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	for {
		fast.mu.Lock()
		n := len(fast.arrived)
		fast.mu.Unlock()
		if n == rounds && slow.inFlight.Load() > 0 {
			break
		}
		tick := time.NewTimer(10 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Fatalf("never saw all %d fast deliveries made with a slow one in flight (%d)", rounds, n)
		case <-tick.C:
		}
	}
	st.dispatcher.halt() // the crash
	st.dispatcher.start(st, st.newDispatcher(15*time.Second).Run)

	results := kafkatest.Decode(t, st.readN(st.topics.Results, want), func() *hooklinev1.AttemptResult { return &hooklinev1.AttemptResult{} })
	seen := map[string]int{}
	for _, r := range results {
		seen[r.GetDeliveryId()]++
		if r.GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED || r.GetAttempt() != 1 {
			t.Fatalf("want every delivery delivered at attempt 1, got %v", r)
		}
	}
	if len(seen) != want {
		t.Fatalf("%d results cover %d deliveries, want %d distinct: a result was written twice", len(results), len(seen), want)
	}
	slow.mu.Lock()
	defer slow.mu.Unlock()
	t.Logf("slow receiver saw %d requests for %d events (repeats after the crash are expected; receivers deduplicate)", len(slow.order), len(slow.arrived))
}
