package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/celfilter"
	"github.com/hookline/hookline/platform/transform"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// scope is the instrumentation scope of ingest's own metrics.
const scope = "github.com/hookline/hookline/services/ingest"

// filterErrorsMetric counts, per endpoint, events whose content filter
// failed to evaluate (and so did not match).
const filterErrorsMetric = "hookline.ingest.filter.errors"

// newFilterErrors returns the counter of filterErrorsMetric.
func newFilterErrors(mp metric.MeterProvider) (metric.Int64Counter, error) {
	c, err := mp.Meter(scope).Int64Counter(filterErrorsMetric, metric.WithUnit("{event}"),
		metric.WithDescription("Events an endpoint's content filter failed to evaluate on (a missing field read without has(), a type mismatch, the cost limit): no delivery was written for them, by endpoint (hookline.endpoint_id)."))
	if err != nil {
		return nil, fmt.Errorf("ingest: metrics: %w", err)
	}
	return c, nil
}

// contentRules are the endpoints' content rules, compiled and evaluated:
// their content filters (CEL, platform/celfilter) and their
// transformations (goja, platform/transform), checked when an endpoint
// is written, run at fan-out, and tried on a sample event
// (TestFilterAndTransformation). It holds the compiled filters and
// transformations, the counter of filters that failed, the logger,
// --max-payload-bytes, the URL rules a transformation's url must keep,
// and the endpoint write path a tried endpoint is read from; nothing
// else.
type contentRules struct {
	// filters holds the endpoints' content filters, compiled.
	filters *celfilter.Cache
	// transforms holds the endpoints' transformations, compiled.
	transforms *transform.Cache
	// filterErrors counts content filters that failed to evaluate.
	filterErrors metric.Int64Counter
	log          *slog.Logger
	// maxPayloadBytes is --max-payload-bytes.
	maxPayloadBytes int
	urls            *urlRules
	endpoints       *endpointWriter
}

// validateFilter compiles an endpoint's content filter (empty: none) and
// keeps it compiled for the fan-outs that will use it. A filter that
// does not compile is INVALID_ARGUMENT with CEL's message and position.
func (c *contentRules) validateFilter(expr string) error {
	if expr == "" {
		return nil
	}
	f, err := celfilter.Compile(expr)
	var ce *celfilter.CompileError
	switch {
	case errors.As(err, &ce):
		return invalid("filter", "%v", err)
	case err != nil:
		return fmt.Errorf("filter: %w", err)
	}
	c.filters.Add(f)
	return nil
}

// filterEvent builds what content filters see of req's event; its
// payload is parsed by the first filter that runs, if any.
func filterEvent(req *hooklinev1.PublishEventRequest) *celfilter.Event {
	return &celfilter.Event{Type: req.GetEventType(), Payload: req.GetPayload(), Metadata: req.GetMetadata(), OrderingKey: req.GetOrderingKey()}
}

// matchContent keeps, in place, the endpoints of eps whose content
// filter matches req's event (those without one always do) and returns
// them. The payload is parsed once, and only if some endpoint of eps
// has a filter. An evaluation error is no match: it is counted in
// filterErrorsMetric and logged at debug.
func (c *contentRules) matchContent(ctx context.Context, req *hooklinev1.PublishEventRequest, eps []*hooklinev1.EndpointRecord) []*hooklinev1.EndpointRecord {
	var ev *celfilter.Event
	out := eps[:0]
	for _, rec := range eps {
		expr := rec.GetEndpoint().GetFilter()
		if expr == "" {
			out = append(out, rec)
			continue
		}
		if ev == nil {
			ev = filterEvent(req)
		}
		ok, err := c.evalFilter(ctx, expr, ev)
		if err != nil {
			id := rec.GetEndpoint().GetId()
			c.filterErrors.Add(ctx, 1, metric.WithAttributes(attribute.String("hookline.endpoint_id", id)))
			c.log.DebugContext(ctx, "endpoint filter failed: no match", "endpoint_id", id, "event_type", req.GetEventType(), "err", err)
			continue
		}
		if ok {
			out = append(out, rec)
		}
	}
	return out
}

// evalFilter evaluates expr, compiled once and cached, against ev.
func (c *contentRules) evalFilter(ctx context.Context, expr string, ev *celfilter.Event) (bool, error) {
	f, err := c.filters.Get(expr)
	if err != nil {
		return false, err
	}
	return f.Match(ctx, ev)
}
