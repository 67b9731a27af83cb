package dispatcher

import (
	"testing"

	"github.com/hookline/hookline/platform/config"
	"github.com/hookline/hookline/platform/endpoints"
)

// The ceilings' defaults are the limits ingest validates endpoints
// against: one home, platform/endpoints.
func TestCeilingDefaultsAreTheEndpointLimits(t *testing.T) {
	cfg, err := config.Defaults[Config]()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxInFlightCeiling != endpoints.MaxInFlightCeiling || cfg.RateLimitCeiling != endpoints.RateLimitCeiling {
		t.Fatalf("--max-in-flight-ceiling %d and --rate-limit-ceiling %v default, want endpoints.MaxInFlightCeiling %d and endpoints.RateLimitCeiling %d",
			cfg.MaxInFlightCeiling, cfg.RateLimitCeiling, endpoints.MaxInFlightCeiling, endpoints.RateLimitCeiling)
	}
}
