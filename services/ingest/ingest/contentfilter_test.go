package ingest

import (
	"log/slog"
	"testing"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/celfilter"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
)

func filterService(t *testing.T) *Service {
	t.Helper()
	errs, err := newFilterErrors(metricnoop.NewMeterProvider())
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	s := &Service{log: log, content: &contentRules{filters: celfilter.NewCache(8), filterErrors: errs, log: log}}
	s.handlers()
	return s
}

func endpointsWithFilters(filters ...string) []*hooklinev1.EndpointRecord {
	var out []*hooklinev1.EndpointRecord
	for i, f := range filters {
		out = append(out, &hooklinev1.EndpointRecord{Endpoint: &hooklinev1.Endpoint{Id: "ep_" + string(rune('a'+i)), Filter: f}})
	}
	return out
}

// TestFanOutWithoutFiltersDoesNotParseThePayload: a fan-out to
// endpoints that have no content filter keeps them all and allocates
// nothing (the payload is not parsed); with filters it keeps those that
// match and drops those whose filter fails to evaluate.
func TestFanOutWithoutFiltersDoesNotParseThePayload(t *testing.T) {
	s := filterService(t)
	req := &hooklinev1.PublishEventRequest{EventType: "invoice.paid", Payload: []byte(`{"amount": 1500}`)}
	plain := endpointsWithFilters("", "", "")
	allocs := testing.AllocsPerRun(100, func() {
		if got := s.content.matchContent(t.Context(), req, plain); len(got) != 3 {
			t.Fatalf("kept %d of 3 endpoints without filters", len(got))
		}
	})
	if allocs != 0 {
		t.Fatalf("a fan-out without filters allocated %v times per event", allocs)
	}
	got := s.content.matchContent(t.Context(), req, endpointsWithFilters("", `payload.amount > 1000`, `payload.amount < 1000`, `payload.missing`))
	var ids []string
	for _, r := range got {
		ids = append(ids, r.GetEndpoint().GetId())
	}
	if len(ids) != 2 || ids[0] != "ep_a" || ids[1] != "ep_b" {
		t.Fatalf("kept %v, want [ep_a ep_b]", ids)
	}
}
