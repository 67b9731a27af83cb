package e2e

import (
	"net/http"
	"strings"
	"testing"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/grpc/metadata"
)

// A producer's tracestate and baggage travel with its event inside
// Hookline (the deliveries topic carries them) but receivers, third
// parties, get traceparent only (--forward-tracestate and
// --forward-baggage are empty by default).
func TestReceiversGetTraceparentButNotTheProducersTracestateOrBaggage(t *testing.T) {
	_, _, withTracing := inMemoryTracing(t)
	st := startStack(t, withTracing)
	rx := newReceiver(t, http.StatusOK)
	st.createEndpoint(rx.URL)

	producerTrace := "4bf92f3577b34da6a3ce929d0e0e4736"
	ctx := metadata.AppendToOutgoingContext(st.ctx(),
		"traceparent", "00-"+producerTrace+"-00f067aa0ba902b7-01",
		"tracestate", "acmevendor=internal-routing-7",
		"baggage", "user.id=alice,session.token=s3cr3t")
	if _, err := st.events().PublishEvent(ctx, &hooklinev1.PublishEventRequest{EventType: "invoice.paid", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	rec := st.readN(st.topics.Deliveries, 1)[0]
	inside := map[string]string{}
	for _, h := range rec.Headers {
		inside[h.Key] = string(h.Value)
	}
	if !strings.Contains(inside["tracestate"], "acmevendor=") || !strings.Contains(inside["baggage"], "session.token=") {
		t.Fatalf("the delivery record's headers %v: want the producer's tracestate and baggage carried inside Hookline", inside)
	}
	st.readN(st.topics.Results, 1)
	posts := rx.got()
	if len(posts) != 1 {
		t.Fatalf("receiver got %d requests, want 1", len(posts))
	}
	h := posts[0].header
	if !strings.HasPrefix(h.Get("traceparent"), "00-"+producerTrace+"-") {
		t.Fatalf("receiver's traceparent %q, want the producer's trace", h.Get("traceparent"))
	}
	if v := h.Values("tracestate"); len(v) != 0 {
		t.Fatalf("receiver got the producer's tracestate %q", v)
	}
	if v := h.Values("baggage"); len(v) != 0 {
		t.Fatalf("receiver got the producer's baggage %q", v)
	}
}
