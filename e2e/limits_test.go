package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// A publish whose payload × matching endpoints exceeds --max-fanout-bytes
// is RESOURCE_EXHAUSTED and writes nothing, with or without an
// idempotency key; RecoverEndpoint refuses a window wider than
// --recover-max-window (INVALID_ARGUMENT) and one holding more than
// --recover-max-deliveries failed deliveries (RESOURCE_EXHAUSTED),
// before writing anything.
func TestFanOutBudgetAndRecoverLimitsAreEnforced(t *testing.T) {
	st := startStack(t, func(c *stackConfig) {
		c.ingest.MaxPayloadBytes = 64
		c.ingest.MaxFanoutBytes = 100
		c.ingest.RecoverMaxWindow = time.Hour
		c.ingest.RecoverMaxDeliveries = 1
	})
	rx := newReceiver(t, http.StatusBadRequest) // permanent: one attempt, then dead-lettered
	var eps []string
	for range 3 {
		eps = append(eps, st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, EventTypes: []string{"limit.*"}, OutageModeDisabled: true}).GetEndpoint().GetId())
	}
	since := time.Now().Add(-time.Minute)
	payload := []byte(`{"pad":"` + strings.Repeat("x", 32) + `"}`) // 42 bytes: 3 endpoints are 126 > 100
	before := st.endOffsets(st.topics.Deliveries)
	for _, key := range []string{"", "fanout-key"} {
		_, err := st.events().PublishEvent(st.ctx(), &hooklinev1.PublishEventRequest{EventType: "limit.hit", Payload: payload, IdempotencyKey: key})
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--max-fanout-bytes") {
			t.Fatalf("publish to 3 endpoints (key %q): %v, want ResourceExhausted naming --max-fanout-bytes", key, err)
		}
	}
	if after := st.endOffsets(st.topics.Deliveries); after != before {
		t.Fatalf("refused fan-outs wrote %d deliveries", after-before)
	}
	// Two named endpoints fit (84 bytes); a second event fails at eps[0]
	// too.
	for _, named := range [][]string{eps[:2], eps[:1]} {
		if _, err := st.events().PublishEvent(st.ctx(), &hooklinev1.PublishEventRequest{EventType: "limit.hit", Payload: payload, EndpointIds: named}); err != nil {
			t.Fatalf("publish to %d endpoints: %v", len(named), err)
		}
	}
	st.readN(st.topics.Dead, 3)

	before = st.endOffsets(st.topics.Deliveries)
	recoverErr := func(req *hooklinev1.RecoverEndpointRequest) error {
		stream, err := st.deliveries().RecoverEndpoint(st.ctx(), req)
		if err == nil {
			_, err = stream.Recv()
		}
		return err
	}
	err := recoverErr(&hooklinev1.RecoverEndpointRequest{EndpointId: eps[0], Since: timestamppb.New(time.Now().Add(-2 * time.Hour))})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "--recover-max-window") {
		t.Fatalf("recover a 2 h window: %v, want InvalidArgument naming --recover-max-window", err)
	}
	err = recoverErr(&hooklinev1.RecoverEndpointRequest{EndpointId: eps[0], Since: timestamppb.New(since)})
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--recover-max-deliveries") {
		t.Fatalf("recover 2 failed deliveries with a limit of 1: %v, want ResourceExhausted naming --recover-max-deliveries", err)
	}
	if after := st.endOffsets(st.topics.Deliveries); after != before {
		t.Fatalf("refused recoveries wrote %d deliveries", after-before)
	}
	// Within the limits: eps[1] has one failed delivery.
	if last := st.recoverAll(&hooklinev1.RecoverEndpointRequest{EndpointId: eps[1], Since: timestamppb.New(since)}); len(last) == 0 || last[len(last)-1].GetTotal() != 1 {
		t.Fatalf("recover within the limits: %v, want 1 delivery", last)
	}
}
