package ingest

import (
	"testing"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/services/ingest/console"
)

// TestABlockedLaneShowsItsEndpointFailingInTheConsole: a delivery whose
// latest result is BLOCKED failed; the console does not call its
// endpoint active.
func TestABlockedLaneShowsItsEndpointFailingInTheConsole(t *testing.T) {
	recent := []*hooklinev1.DeliveryStatus{{State: hooklinev1.DeliveryState_DELIVERY_STATE_BLOCKED}}
	if h := healthOf(&hooklinev1.Endpoint{}, recent); h.Health != console.HealthFailing {
		t.Fatalf("health %v; want failing", h.Health)
	}
}
