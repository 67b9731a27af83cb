package e2e

import (
	"net/http"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/kafkatest"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestPublishAnswersWithinThePublishTimeoutWhileKafkaIsFrozen: with
// Kafka not answering, PublishEvent answers UNAVAILABLE (or
// DEADLINE_EXCEEDED) at --publish-timeout, even when its write is already
// on the wire; once Kafka answers again, a retry with the same
// idempotency key is accepted and the event is delivered.
func TestPublishAnswersWithinThePublishTimeoutWhileKafkaIsFrozen(t *testing.T) {
	// kgo's default RequestTimeoutOverhead: the earliest kgo ends a
	// request to a broker that does not answer.
	const kgoRequestTimeoutOverhead = 10 * time.Second
	tests := []struct {
		name        string
		produceOnly bool
	}{
		{"whole broker", false},
		{"produce in flight", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const publishTimeout = time.Second
			fr := kafkatest.NewFreezer(tt.produceOnly)
			defer fr.Thaw()
			st := startStack(t, func(c *stackConfig) {
				c.kafka.ClientOpts = append(c.kafka.ClientOpts, kgo.Dialer(fr.Dial))
				c.ingest.PublishTimeout = publishTimeout
			})
			rx := newReceiver(t, http.StatusOK)
			st.createEndpoint(rx.URL)
			req := &hooklinev1.PublishEventRequest{EventType: "invoice.paid", Payload: []byte(`{"n":1}`), IdempotencyKey: "frozen-" + tt.name}

			fr.Freeze()
			answered := make(chan error, 1)
			go func() {
				_, err := st.events().PublishEvent(st.ctx(), req)
				answered <- err
			}()
			// The bound under test: the timeout plus scheduling slack.
			// What it tells apart is an answer at --publish-timeout from
			// one that waits on kgo to give up on the frozen broker, which
			// kgo does no sooner than its request timeout overhead (10 s
			// by default) after the call: the slack is half of that, room
			// for a loaded machine (this failed once with 3 s at a load
			// average of 30) while still far from kgo's timeouts.
			bound := publishTimeout + kgoRequestTimeoutOverhead/2
			timer := time.NewTimer(bound)
			defer timer.Stop()
			select {
			case err := <-answered:
				if c := status.Code(err); c != codes.Unavailable && c != codes.DeadlineExceeded {
					t.Fatalf("frozen publish answered %v, want UNAVAILABLE or DEADLINE_EXCEEDED", err)
				}
			case <-timer.C:
				t.Fatalf("no answer %s after the call although --publish-timeout is %s", bound, publishTimeout)
			}
			fr.Thaw()

			// What the README tells a caller: retry with the same key.
			// Each retry has the same 1 s budget, which a loaded machine
			// may miss a few times; it must succeed before the suite's
			// wait runs out, however many tries that takes.
			var resp *hooklinev1.PublishEventResponse
			retryUntil := time.Now().Add(waitFor)
			for try := 1; ; try++ {
				var err error
				resp, err = st.events().PublishEvent(st.ctx(), req)
				if err == nil {
					break
				}
				if c := status.Code(err); (c != codes.Unavailable && c != codes.DeadlineExceeded) || time.Now().After(retryUntil) {
					t.Fatalf("retry %d after the thaw: %v", try, err)
				}
			}
			if len(resp.GetDeliveries()) != 1 {
				t.Fatalf("deliveries %v, want one", resp.GetDeliveries())
			}
			recs := st.readN(st.topics.Results, 1)
			res := kafkatest.Decode(t, recs, func() *hooklinev1.AttemptResult { return &hooklinev1.AttemptResult{} })
			if res[0].GetDeliveryId() != resp.GetDeliveries()[0].GetDeliveryId() || res[0].GetClass() != hooklinev1.OutcomeClass_OUTCOME_CLASS_SUCCESS {
				t.Fatalf("result %v, want a success for delivery %s", res[0], resp.GetDeliveries()[0].GetDeliveryId())
			}
		})
	}
}
