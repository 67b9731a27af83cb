package ingest

import (
	"context"
	"strings"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// checkRules runs req through the field rules' interceptor, as the
// server does before a handler: nil when req keeps them.
func checkRules(t testing.TB, req proto.Message) error {
	t.Helper()
	rules, err := newFieldRules()
	if err != nil {
		t.Fatal(err)
	}
	_, err = rules.unary(context.Background(), req, &grpc.UnaryServerInfo{}, func(context.Context, any) (any, error) { return nil, nil })
	return err
}

// Every field rule the proto declares is refused with INVALID_ARGUMENT
// naming the field and what to fix, with the violations as a detail.
func TestFieldRulesSayWhichFieldAndWhatToFix(t *testing.T) {
	long := func(n int) string { return strings.Repeat("k", n) }
	cases := []struct {
		name string
		req  proto.Message
		says string // "" for a request that keeps every rule
	}{
		{"ordering key, none", &hooklinev1.PublishEventRequest{}, ""},
		{"ordering key, printable", &hooklinev1.PublishEventRequest{OrderingKey: "customer-42/orders"}, ""},
		{"ordering key, 128 bytes", &hooklinev1.PublishEventRequest{OrderingKey: long(128)}, ""},
		{"ordering key, 129 bytes", &hooklinev1.PublishEventRequest{OrderingKey: long(129)}, "ordering_key: must be at most 128 bytes of printable ASCII"},
		{"ordering key, control byte", &hooklinev1.PublishEventRequest{OrderingKey: "a\nb"}, "ordering_key: must be at most 128 bytes of printable ASCII"},
		{"ordering key, non-ASCII", &hooklinev1.PublishEventRequest{OrderingKey: "ä"}, "ordering_key:"},
		{"lane command's ordering key", &hooklinev1.SkipLaneHeadRequest{EndpointId: "ep_1", DeliveryId: "dlv_01m97z10ta0c1ysst6axae8g0w", OrderingKey: long(129)}, "ordering_key:"},
		{"idempotency key, 257 bytes", &hooklinev1.PublishEventRequest{IdempotencyKey: long(257)}, "idempotency_key: must be at most 256 bytes"},
		{"metadata, an empty key", &hooklinev1.PublishEventRequest{Metadata: map[string]string{"": "v"}}, "metadata"},
		{"metadata, a long value", &hooklinev1.TestFilterAndTransformationRequest{Metadata: map[string]string{"k": long(1025)}}, "metadata: at most 64 labels"},
		{"metadata, 1,024 bytes", &hooklinev1.PublishEventRequest{Metadata: map[string]string{"k": long(1024)}}, ""},
		{"endpoint rate, below the floor", &hooklinev1.Endpoint{RateLimitPerSecond: 0.0005}, "rate_limit_per_second: must be 0 (the default) or from 0.001"},
		{"endpoint timeout, 61 s", &hooklinev1.CreateEndpointRequest{Url: "https://x", Timeout: durationpb.New(61 * time.Second)}, "timeout: must be between 1s and 60s"},
		{"a ladder's delay, 8 days", &hooklinev1.RetryPolicy{Schedule: &hooklinev1.RetryPolicy_Ladder{Ladder: &hooklinev1.RetryPolicy_DelayLadder{Delays: []*durationpb.Duration{durationpb.New(8 * 24 * time.Hour)}}}}, "ladder.delays[0]: must be between 0 and 7 days"},
		{"ordering, per key", &hooklinev1.CreateEndpointRequest{Url: "https://x", Ordering: hooklinev1.Ordering_ORDERING_PER_KEY}, ""},
		{"ordering, unknown", &hooklinev1.CreateEndpointRequest{Url: "https://x", Ordering: 9}, "ordering: value must be one of the defined enum values"},
		{"on_head_failure, unknown", &hooklinev1.CreateEndpointRequest{Url: "https://x", OnHeadFailure: 7}, "on_head_failure:"},
		{"url, missing", &hooklinev1.CreateEndpointRequest{}, "url: must be at least 1 characters"},
		{"url, too long", &hooklinev1.CreateEndpointRequest{Url: "https://x/" + long(2048)}, "url: must be at most 2,048 bytes"},
		{"update, description too long", &hooklinev1.UpdateEndpointRequest{Endpoint: &hooklinev1.Endpoint{Description: long(1025)}}, "endpoint.description:"},
		{"get, no id", &hooklinev1.GetEndpointRequest{}, "id: must be at least 1 characters"},
		{"pause, long reason", &hooklinev1.PauseEndpointRequest{Id: "ep_1", Reason: long(1025)}, "reason:"},
		{"list, page too large", &hooklinev1.ListEndpointsRequest{PageSize: 1001}, "page_size: must be at most 1,000"},
		{"deliveries, page too large", &hooklinev1.ListDeliveriesRequest{PageSize: 1001}, "page_size:"},
		{"deliveries, unknown state", &hooklinev1.ListDeliveriesRequest{State: 99}, "state:"},
		{"get event, no id", &hooklinev1.GetEventRequest{}, "event_id:"},
		{"resend, no id", &hooklinev1.ResendDeliveryRequest{}, "delivery_id:"},
		{"recover, no since", &hooklinev1.RecoverEndpointRequest{EndpointId: "ep_1"}, "since: value is required"},
		{"skip, not a delivery id", &hooklinev1.SkipLaneHeadRequest{EndpointId: "ep_1", DeliveryId: "evt_01m97z10ta0c1ysst6axae8g0w"}, "delivery_id: is not a delivery id"},
		{"skip, no delivery id", &hooklinev1.SkipLaneHeadRequest{EndpointId: "ep_1"}, "delivery_id: is required: the blocked head's delivery id"},
		{"skip, a delivery id", &hooklinev1.SkipLaneHeadRequest{EndpointId: "ep_1", DeliveryId: "dlv_01m97z10ta0c1ysst6axae8g0w"}, ""},
		{"blocked lanes, no endpoint", &hooklinev1.ListBlockedLanesRequest{}, "endpoint_id:"},
	}
	for _, c := range cases {
		err := checkRules(t, c.req)
		if c.says == "" {
			if err != nil {
				t.Errorf("%s: refused: %v", c.name, err)
			}
			continue
		}
		st := status.Convert(err)
		if st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), c.says) {
			t.Errorf("%s: %v; want InvalidArgument starting %q", c.name, err, c.says)
		}
		if len(st.Details()) != 1 {
			t.Errorf("%s: %d details; want the violations", c.name, len(st.Details()))
		}
	}
}

// BenchmarkFieldRulesPublishEvent is what the field rules cost a
// typical publish (a 500-byte payload, an ordering key, two labels).
func BenchmarkFieldRulesPublishEvent(b *testing.B) {
	req := &hooklinev1.PublishEventRequest{EventType: "invoice.paid", Payload: []byte(`{"amount":` + strings.Repeat("1", 480) + `}`),
		IdempotencyKey: "order-42", OrderingKey: "customer-7", Metadata: map[string]string{"region": "eu", "tier": "gold"}}
	if err := checkRules(b, req); err != nil {
		b.Fatal(err)
	}
	rules, _ := newFieldRules()
	next := func(context.Context, any) (any, error) { return nil, nil }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rules.unary(context.Background(), req, &grpc.UnaryServerInfo{}, next); err != nil {
			b.Fatal(err)
		}
	}
}
