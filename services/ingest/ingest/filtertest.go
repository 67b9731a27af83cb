package ingest

import (
	"context"
	"net/http"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/celfilter"
	"github.com/hookline/hookline/platform/filter"
	"github.com/hookline/hookline/platform/transform"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// sampleURL is the url a tried transformation sees without an endpoint.
const sampleURL = "https://example.com/"

// TestFilterAndTransformation runs a content filter and a transformation,
// the ones given or the named endpoint's, against a sample event, as a
// fan-out would: it answers whether the event matches (with the
// evaluation error, if any), the webhook the transformation returned, or
// that it cancelled, or why it failed, and the time each took. The
// transformation runs whatever the filter decided. It writes nothing.
func (h *endpointService) TestFilterAndTransformation(ctx context.Context, req *hooklinev1.TestFilterAndTransformationRequest) (*hooklinev1.TestFilterAndTransformationResponse, error) {
	s := h.s
	if err := filter.ValidateType(req.GetEventType()); err != nil {
		return nil, invalid("event_type", "%v", err)
	}
	if err := payloadLimit(s.cfg.MaxPayloadBytes).check(len(req.GetPayload())); err != nil {
		return nil, err
	}
	// metadata and ordering_key: the proto's rules (fieldrules.go).
	tr, err := s.content.toTest(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := &hooklinev1.TestFilterAndTransformationResponse{}
	if tr.filter != nil {
		ev := &celfilter.Event{Type: req.GetEventType(), Payload: req.GetPayload(), Metadata: req.GetMetadata(), OrderingKey: req.GetOrderingKey()}
		start := s.now()
		matched, err := tr.filter.Match(ctx, ev)
		resp.Filter = &hooklinev1.FilterResult{Matched: matched, Duration: durationpb.New(s.now().Sub(start))}
		if err != nil {
			resp.Filter.Error = err.Error()
		}
	}
	if tr.program != nil {
		resp.Transformation = s.content.tryTransformation(ctx, tr.program, req, tr.url)
	}
	return resp, nil
}

// tried is what a TestFilterAndTransformation call runs: a filter, a
// transformation (nil: none) and the url the transformation sees.
type tried struct {
	filter  *celfilter.Filter
	program *transform.Program
	url     string
}

// toTest compiles req's filter and transformation, taking the endpoint's
// own for each that req leaves empty when it names endpoint_id. One of
// the two must be there to try.
func (c *contentRules) toTest(ctx context.Context, req *hooklinev1.TestFilterAndTransformationRequest) (tried, error) {
	tr := tried{url: sampleURL}
	var ep *hooklinev1.Endpoint
	if id := req.GetEndpointId(); id != "" {
		if err := c.endpoints.readBarrier(ctx); err != nil {
			return tried{}, err
		}
		rec, err := c.endpoints.owned(ctx, id)
		if err != nil {
			return tried{}, err
		}
		ep = rec.GetEndpoint()
		tr.url = ep.GetUrl()
	}
	if expr := req.GetFilter(); expr != "" {
		// Not cached: a filter being tried may never be saved.
		f, err := celfilter.Compile(expr)
		if err != nil {
			return tried{}, invalid("filter", "%v", err)
		}
		tr.filter = f
	} else if expr := ep.GetFilter(); expr != "" {
		f, err := c.filters.Get(expr)
		if err != nil {
			return tried{}, status.Errorf(codes.FailedPrecondition, "endpoint %s: its filter no longer compiles (%v); update it", ep.GetId(), err)
		}
		tr.filter = f
	}
	if src := req.GetTransformation(); src != "" {
		// Not cached: a script being tried may never be saved, and a
		// fresh program shares no runtime with anyone.
		p, err := transform.Compile(src)
		if err != nil {
			return tried{}, invalid("transformation", "%v", err)
		}
		tr.program = p
	} else if src := ep.GetTransformation(); src != "" {
		// The fan-out's program, from the tenant's part of the cache.
		p, err := c.transforms.Get(ep.GetTenantId(), src)
		if err != nil {
			return tried{}, status.Errorf(codes.FailedPrecondition, "endpoint %s: its transformation no longer compiles (%v); update it", ep.GetId(), err)
		}
		tr.program = p
	}
	if tr.filter == nil && tr.program == nil {
		if ep != nil {
			return tried{}, status.Errorf(codes.FailedPrecondition, "endpoint %s has neither a filter nor a transformation; give filter or transformation to try one", ep.GetId())
		}
		return tried{}, invalid("filter", "is required, or transformation, or name endpoint_id to test that endpoint's")
	}
	return tr, nil
}

// tryTransformation runs p on req's sample event as transformDelivery
// runs it at fan-out: the same input, limits and URL check.
func (c *contentRules) tryTransformation(ctx context.Context, p *transform.Program, req *hooklinev1.TestFilterAndTransformationRequest, url string) *hooklinev1.TransformationResult {
	res, err := p.Run(ctx, transform.Webhook{
		EventType: req.GetEventType(),
		Payload:   req.GetPayload(),
		URL:       url,
		Method:    http.MethodPost,
		Headers:   map[string]string{},
	}, transform.Limits{
		MaxPayloadBytes: c.maxPayloadBytes,
		ValidateURL:     c.urls.validateURL,
	})
	out := &hooklinev1.TransformationResult{Duration: durationpb.New(res.Took)}
	switch {
	case err != nil:
		out.Error = err.Error()
	case res.Cancelled:
		out.Cancelled = true
	default:
		w := res.Webhook
		out.Webhook = &hooklinev1.TransformedWebhook{EventType: w.EventType, Payload: w.Payload, Url: w.URL, Method: w.Method, Headers: w.Headers}
	}
	return out
}
