package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/kafkatest"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestPublishPushesBackWhenKafkaBacksUp: while Kafka takes writes but
// does not confirm them, ingest holds at most --max-in-flight-bytes of
// publishes; the calls beyond it are answered RESOURCE_EXHAUSTED at once,
// with a RetryInfo delay, instead of piling up in memory until their
// publish timeout. Once Kafka answers again, the same calls retried with
// the same idempotency keys are all accepted and delivered.
func TestPublishPushesBackWhenKafkaBacksUp(t *testing.T) {
	const (
		publishTimeout = 3 * time.Second
		calls          = 10
		limit          = 64 << 10
	)
	fr := kafkatest.NewFreezer(true)
	defer fr.Thaw()
	st := startStack(t, func(c *stackConfig) {
		c.kafka.ClientOpts = append(c.kafka.ClientOpts, kgo.Dialer(fr.Dial))
		c.ingest.PublishTimeout = publishTimeout
		c.ingest.MaxInFlightBytes = limit
	})
	rx := newReceiver(t, http.StatusOK)
	// A produce: its connection now freezes with the others. Written under
	// the short publish timeout, a fresh stack's first endpoint write may
	// not be confirmed in time on a loaded machine; it may still apply, so
	// read before retrying, as the error says.
	createPatiently(t, st, &hooklinev1.CreateEndpointRequest{Url: rx.URL})
	payload := fmt.Sprintf(`{"pad":%q}`, strings.Repeat("x", 8<<10))
	req := func(i int) *hooklinev1.PublishEventRequest {
		return &hooklinev1.PublishEventRequest{EventType: "invoice.paid", Payload: []byte(payload), IdempotencyKey: fmt.Sprintf("bp-%d", i)}
	}

	fr.Freeze()
	type answer struct {
		err  error
		took time.Duration
	}
	answers := make([]answer, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			start := time.Now()
			_, err := st.events().PublishEvent(st.ctx(), req(i))
			answers[i] = answer{err, time.Since(start)}
		})
	}
	wg.Wait()
	fr.Thaw()

	var pushedBack int
	for i, a := range answers {
		switch status.Code(a.err) {
		case codes.ResourceExhausted:
			pushedBack++
			if a.took >= publishTimeout {
				t.Errorf("call %d: RESOURCE_EXHAUSTED after %v; a push-back must come at once, not at --publish-timeout (%v)", i, a.took, publishTimeout)
			}
			var delay *errdetails.RetryInfo
			for _, d := range status.Convert(a.err).Details() {
				if ri, ok := d.(*errdetails.RetryInfo); ok {
					delay = ri
				}
			}
			if delay == nil || delay.GetRetryDelay().AsDuration() <= 0 {
				t.Errorf("call %d: RESOURCE_EXHAUSTED without a RetryInfo delay: %v", i, a.err)
			}
		case codes.Unavailable, codes.DeadlineExceeded:
			// admitted, and not confirmed while Kafka was frozen
		default:
			t.Errorf("call %d while Kafka was frozen: %v, want RESOURCE_EXHAUSTED or (admitted) UNAVAILABLE", i, a.err)
		}
	}
	if pushedBack == 0 || pushedBack == calls {
		t.Fatalf("%d of %d calls pushed back, want some admitted (up to %d bytes) and the rest pushed back", pushedBack, calls, limit)
	}

	// What the README tells a caller: retry with the same key.
	for i := range calls {
		for try := 1; ; try++ {
			_, err := st.events().PublishEvent(st.ctx(), req(i))
			if err == nil {
				break
			}
			if c := status.Code(err); (c != codes.Unavailable && c != codes.DeadlineExceeded && c != codes.ResourceExhausted) || try == 10 {
				t.Fatalf("call %d, retry %d after the thaw: %v", i, try, err)
			}
		}
	}
	res := kafkatest.Decode(t, st.readN(st.topics.Results, calls), func() *hooklinev1.AttemptResult { return &hooklinev1.AttemptResult{} })
	for _, r := range res {
		if r.GetClass() != hooklinev1.OutcomeClass_OUTCOME_CLASS_SUCCESS {
			t.Fatalf("result %v, want every event delivered", r)
		}
	}
}

// createPatiently creates the endpoint req describes, retrying a change
// that was not confirmed in time only once a read shows it did not apply.
func createPatiently(t *testing.T, st *stack, req *hooklinev1.CreateEndpointRequest) {
	t.Helper()
	for try := 1; ; try++ {
		_, err := st.endpoints().CreateEndpoint(st.ctx(), req)
		if err == nil {
			return
		}
		if status.Code(err) != codes.Unavailable || try == 5 {
			t.Fatalf("create endpoint, try %d: %v", try, err)
		}
		list, lerr := st.endpoints().ListEndpoints(st.ctx(), &hooklinev1.ListEndpointsRequest{})
		if lerr != nil {
			continue
		}
		for _, ep := range list.GetEndpoints() {
			if ep.GetUrl() == req.GetUrl() {
				return
			}
		}
	}
}
