package ingest

import (
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/services/ingest/console"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestABlockedLaneShowsItsEndpointFailingInTheConsole: a delivery whose
// latest result is BLOCKED failed; the console does not call its
// endpoint active.
func TestABlockedLaneShowsItsEndpointFailingInTheConsole(t *testing.T) {
	recent := []*hooklinev1.DeliveryStatus{{State: hooklinev1.DeliveryState_DELIVERY_STATE_BLOCKED}}
	if h := healthOf(&hooklinev1.Endpoint{}, recent, time.Unix(1_800_000_000, 0)); h.Health != console.HealthFailing {
		t.Fatalf("health %v; want failing", h.Health)
	}
}

// TestConsoleLabelsEndpointsByWhatTheDispatcherDoes: an endpoint whose
// deliveries fail for good (a 410 to everything) is failing, not in
// outage mode (outage mode never holds on permanent failures); one
// whose latest deliveries failed transiently and wait past their due
// time is in outage mode (held, probed), unless it opted out.
func TestConsoleLabelsEndpointsByWhatTheDispatcherDoes(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	failed := &hooklinev1.DeliveryStatus{State: hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, Reason: "permanent failure"}
	retrying := func(dueAgo time.Duration) *hooklinev1.DeliveryStatus {
		return &hooklinev1.DeliveryStatus{State: hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED, NextAttemptAt: timestamppb.New(now.Add(-dueAgo))}
	}
	tests := []struct {
		name   string
		ep     *hooklinev1.Endpoint
		recent []*hooklinev1.DeliveryStatus
		want   console.Health
	}{
		{"410 to everything", &hooklinev1.Endpoint{}, []*hooklinev1.DeliveryStatus{failed, failed, failed, failed, failed}, console.HealthFailing},
		{"held in outage mode", &hooklinev1.Endpoint{}, []*hooklinev1.DeliveryStatus{{State: hooklinev1.DeliveryState_DELIVERY_STATE_PENDING}, retrying(3 * time.Minute), retrying(4 * time.Minute)}, console.HealthOutage},
		{"outage mode disabled", &hooklinev1.Endpoint{OutageModeDisabled: true}, []*hooklinev1.DeliveryStatus{retrying(3 * time.Minute), retrying(4 * time.Minute)}, console.HealthFailing},
		{"one retry not yet due", &hooklinev1.Endpoint{}, []*hooklinev1.DeliveryStatus{retrying(-time.Minute)}, console.HealthFailing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if h := healthOf(tt.ep, tt.recent, now); h.Health != tt.want {
				t.Fatalf("health %v (%s); want %v", h.Health, h.Detail, tt.want)
			}
		})
	}
}
