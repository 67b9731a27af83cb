package e2e

import (
	"context"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/kafkatest"
)

// TestWaitingForCapAndRateWritesNothingToKafka: deliveries that wait for
// their endpoint's cap and rate wait in the dispatcher's memory: every
// one is delivered at attempt 1, the cap is never exceeded, and nothing
// goes through the retry path.
func TestWaitingForCapAndRateWritesNothingToKafka(t *testing.T) {
	st := startStack(t)
	rx := newCountingReceiver(t, 50*time.Millisecond)
	st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, MaxInFlight: 2, RateLimitPerSecond: 25})
	const n = 40
	for range n {
		st.publish("invoice.paid", `{}`)
	}
	st.deliveredAll(n)
	if m := rx.maxInFlight.Load(); m > 2 {
		t.Fatalf("receiver saw %d requests in flight, cap is 2", m)
	}
	if w := st.endOffsets(st.topics.Retries); w != 0 {
		t.Fatalf("%d records written to the retries topic while deliveries only waited for cap and rate", w)
	}
}

// TestABacklogBeyondItsBudgetIsSpilledAndStillDelivered: an endpoint's
// queue holds its budget (here 5 deliveries); the rest are spilled to the
// retry path, and every delivery still arrives exactly once at attempt 1.
func TestABacklogBeyondItsBudgetIsSpilledAndStillDelivered(t *testing.T) {
	st := startStack(t, func(c *stackConfig) {
		c.dispatcher.QueueMin = 5
		c.dispatcher.QueueTime = 0
	})
	rx := newCountingReceiver(t, 0)
	st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, RateLimitPerSecond: 20})
	const n = 30
	for range n {
		st.publish("invoice.paid", `{}`)
	}
	st.deliveredAll(n)
	rx.mu.Lock()
	defer rx.mu.Unlock()
	if len(rx.arrived) != n {
		t.Fatalf("receiver got %d distinct events, want %d", len(rx.arrived), n)
	}
	if w := st.endOffsets(st.topics.Retries); w == 0 {
		t.Fatal("nothing spilled although the backlog was six times the endpoint's budget")
	}
}

// TestAStuckEndpointDoesNotHoldBackItsPartition: on one partition, a
// slow endpoint's backlog (8 deliveries at 1/s: 8 s of work) comes
// first; a healthy endpoint's deliveries after it are delivered and
// committed within a few seconds, because the slow endpoint's waiting
// deliveries are spilled once the partition's watermark stands still for
// --stuck-after. The slow ones still arrive, each at attempt 1.
func TestAStuckEndpointDoesNotHoldBackItsPartition(t *testing.T) {
	st := startStack(t, func(c *stackConfig) {
		c.kafka.Partitions = 1
		c.dispatcher.StuckAfter = 300 * time.Millisecond
	})
	slow := newCountingReceiver(t, 0)
	healthy := newCountingReceiver(t, 0)
	st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: slow.URL, RateLimitPerSecond: 1, EventTypes: []string{"slow.*"}})
	st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: healthy.URL, EventTypes: []string{"healthy.*"}})
	const slowN, healthyN = 8, 10
	for range slowN {
		st.publish("slow.tick", `{}`)
	}
	want := map[string]bool{}
	for range healthyN {
		want[st.publish("healthy.tick", `{}`).GetEventId()] = true
	}
	// Committed results of the healthy endpoint, well before the slow
	// one could have drained (8 s).
	st.wait = 4 * time.Second
	cl := st.reader(st.topics.Results)
	defer cl.Close()
	deadline := time.Now().Add(st.wait)
	got := 0
	for got < healthyN {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d healthy results committed within %v beside a stuck endpoint", got, healthyN, st.wait)
		}
		ctx, cancel := contextUntil(t, deadline)
		fs := cl.PollFetches(ctx)
		cancel()
		for _, r := range kafkatest.Decode(t, fs.Records(), func() *hooklinev1.AttemptResult { return &hooklinev1.AttemptResult{} }) {
			if want[r.GetEventId()] && r.GetState() == hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED {
				got++
			}
		}
	}
	st.wait = 0
	st.deliveredAll(slowN + healthyN)
}

func contextUntil(t *testing.T, at time.Time) (context.Context, context.CancelFunc) {
	return context.WithDeadline(t.Context(), at)
}
