package ingest

import (
	"context"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/celfilter"
	"github.com/hookline/hookline/platform/filter"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// TestFilterAndTransformation runs a content filter, the one given or
// the named endpoint's, against a sample event, as a fan-out would: it
// answers whether the event matches, the evaluation error if any, and
// the time the evaluation took. It writes nothing. (Transformations are
// not tested here yet.)
func (s *Service) TestFilterAndTransformation(ctx context.Context, req *hooklinev1.TestFilterAndTransformationRequest) (*hooklinev1.TestFilterAndTransformationResponse, error) {
	if err := filter.ValidateType(req.GetEventType()); err != nil {
		return nil, invalid("event_type", "%v", err)
	}
	if err := payloadLimit(s.cfg.MaxPayloadBytes).check(len(req.GetPayload())); err != nil {
		return nil, err
	}
	if err := validateMetadata(req.GetMetadata()); err != nil {
		return nil, err
	}
	if err := validateOrderingKey(req.GetOrderingKey()); err != nil {
		return nil, err
	}
	f, err := s.filterToTest(ctx, req)
	if err != nil {
		return nil, err
	}
	ev := &celfilter.Event{Type: req.GetEventType(), Payload: req.GetPayload(), Metadata: req.GetMetadata(), OrderingKey: req.GetOrderingKey()}
	start := s.now()
	matched, err := f.Match(ctx, ev)
	res := &hooklinev1.FilterResult{Matched: matched, Duration: durationpb.New(s.now().Sub(start))}
	if err != nil {
		res.Error = err.Error()
	}
	return &hooklinev1.TestFilterAndTransformationResponse{Filter: res}, nil
}

// filterToTest compiles req's filter, or returns the compiled filter of
// req's endpoint when it names none.
func (s *Service) filterToTest(ctx context.Context, req *hooklinev1.TestFilterAndTransformationRequest) (*celfilter.Filter, error) {
	if expr := req.GetFilter(); expr != "" {
		// Not cached: a filter being tried may never be saved.
		f, err := celfilter.Compile(expr)
		if err != nil {
			return nil, invalid("filter", "%v", err)
		}
		return f, nil
	}
	if req.GetEndpointId() == "" {
		return nil, invalid("filter", "is required, or name endpoint_id to test that endpoint's filter")
	}
	if err := s.readBarrier(ctx); err != nil {
		return nil, err
	}
	rec, err := s.owned(ctx, req.GetEndpointId())
	if err != nil {
		return nil, err
	}
	expr := rec.GetEndpoint().GetFilter()
	if expr == "" {
		return nil, status.Errorf(codes.FailedPrecondition, "endpoint %s has no filter (it receives every event of its event_types); give one in filter to try it", req.GetEndpointId())
	}
	f, err := s.filters.Get(expr)
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "endpoint %s: its filter no longer compiles (%v); update it", req.GetEndpointId(), err)
	}
	return f, nil
}
