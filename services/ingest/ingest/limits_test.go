package ingest

import (
	"math"
	"strings"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// NaN, infinite, negative and all-zero retry schedules and rates, and
// limits above the dispatcher's ceilings, are INVALID_ARGUMENT naming the
// field, by the field rules (fieldrules.go), before any handler runs.
func TestEndpointLimitsRefuseNaNInfiniteNegativeZeroAndAboveCeilings(t *testing.T) {
	ladder := func(ds ...time.Duration) *hooklinev1.RetryPolicy {
		l := &hooklinev1.RetryPolicy_DelayLadder{}
		for _, d := range ds {
			l.Delays = append(l.Delays, durationpb.New(d))
		}
		return &hooklinev1.RetryPolicy{Schedule: &hooklinev1.RetryPolicy_Ladder{Ladder: l}}
	}
	factor := func(f float64) *hooklinev1.RetryPolicy {
		return &hooklinev1.RetryPolicy{Schedule: &hooklinev1.RetryPolicy_Exponential{Exponential: &hooklinev1.RetryPolicy_ExponentialBackoff{Factor: f}}}
	}
	tests := []struct {
		name  string
		give  *hooklinev1.CreateEndpointRequest
		field string
	}{
		{"rate NaN", &hooklinev1.CreateEndpointRequest{RateLimitPerSecond: math.NaN()}, "rate_limit_per_second"},
		{"rate +Inf", &hooklinev1.CreateEndpointRequest{RateLimitPerSecond: math.Inf(1)}, "rate_limit_per_second"},
		{"rate -Inf", &hooklinev1.CreateEndpointRequest{RateLimitPerSecond: math.Inf(-1)}, "rate_limit_per_second"},
		{"rate negative", &hooklinev1.CreateEndpointRequest{RateLimitPerSecond: -1}, "rate_limit_per_second"},
		{"rate above the ceiling", &hooklinev1.CreateEndpointRequest{RateLimitPerSecond: 100001}, "rate_limit_per_second"},
		{"rate below the floor", &hooklinev1.CreateEndpointRequest{RateLimitPerSecond: 1e-12}, "rate_limit_per_second"},
		{"rate just below the floor", &hooklinev1.CreateEndpointRequest{RateLimitPerSecond: 0.000999}, "rate_limit_per_second"},
		{"max_in_flight above the ceiling", &hooklinev1.CreateEndpointRequest{MaxInFlight: 1001}, "max_in_flight"},
		{"factor NaN", &hooklinev1.CreateEndpointRequest{RetryPolicy: factor(math.NaN())}, "retry_policy.exponential.factor"},
		{"factor +Inf", &hooklinev1.CreateEndpointRequest{RetryPolicy: factor(math.Inf(1))}, "retry_policy.exponential.factor"},
		{"factor negative", &hooklinev1.CreateEndpointRequest{RetryPolicy: factor(-2)}, "retry_policy.exponential.factor"},
		{"ladder all zero", &hooklinev1.CreateEndpointRequest{RetryPolicy: ladder(0, 0, 0)}, "retry_policy.ladder"},
		{"ladder negative", &hooklinev1.CreateEndpointRequest{RetryPolicy: ladder(time.Second, -time.Second)}, "retry_policy.ladder.delays[1]"},
		{"ladder empty", &hooklinev1.CreateEndpointRequest{RetryPolicy: ladder()}, "retry_policy.ladder.delays"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.give.Url = "https://127.0.0.1:9/hooks"
			err := checkRules(t, tt.give)
			if status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), tt.field+":") {
				t.Fatalf("got %v, want InvalidArgument on %s", err, tt.field)
			}
		})
	}
	// A rate below the floor is refused naming the floor.
	if err := checkRules(t, &hooklinev1.CreateEndpointRequest{Url: "https://x", RateLimitPerSecond: 1e-12}); !strings.Contains(status.Convert(err).Message(), "0.001") {
		t.Errorf("a rate below the floor: %v, want the floor 0.001 named", err)
	}
	// At the ceilings, and a ladder with one positive delay, are fine.
	for _, req := range []*hooklinev1.CreateEndpointRequest{
		{RateLimitPerSecond: 100000}, {RateLimitPerSecond: 0}, {RateLimitPerSecond: 0.001}, {MaxInFlight: 1000},
		{RetryPolicy: ladder(0, time.Second)}, {RetryPolicy: factor(1)}, {RetryPolicy: factor(0)},
	} {
		req.Url = "https://127.0.0.1:9/hooks"
		if err := checkRules(t, req); err != nil {
			t.Errorf("refused a valid limit: %v", err)
		}
	}
}
