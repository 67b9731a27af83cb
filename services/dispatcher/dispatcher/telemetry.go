package dispatcher

import (
	"context"
	"fmt"
	"strconv"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/telemetry"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kotel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// headerLastAttempt carries, on a retry and on every hop after it, the
// W3C traceparent of the delivery's last HTTP attempt: the next attempt's
// span links to it. The traceparent header itself stays the delivery's
// origin (ingest's publish span), so every attempt is a child of one
// trace however long the delays between them.
const headerLastAttempt = "hookline-last-attempt"

// traceHeaders travel with a delivery through every hop.
var traceHeaders = []string{"traceparent", "tracestate", "baggage", headerLastAttempt}

const scope = "github.com/hookline/hookline/services/dispatcher"

// instruments are the dispatcher's metrics.
type instruments struct {
	attempts   metric.Int64Counter
	duration   metric.Float64Histogram
	deliveries metric.Int64Counter
	inFlight   metric.Int64UpDownCounter
	retries    metric.Int64Counter
	deferrals  metric.Int64Counter
}

func newInstruments(mp metric.MeterProvider) (instruments, error) {
	m := mp.Meter(scope)
	var in instruments
	var errs [6]error
	in.attempts, errs[0] = m.Int64Counter("hookline.dispatcher.attempts", metric.WithUnit("{attempt}"),
		metric.WithDescription("HTTP attempts made, by outcome class (success, transient, permanent, ambiguous)."))
	in.duration, errs[1] = m.Float64Histogram("hookline.dispatcher.attempt.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from sending an attempt to its last response byte read, by outcome class."),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
	in.deliveries, errs[2] = m.Int64Counter("hookline.dispatcher.deliveries", metric.WithUnit("{delivery}"),
		metric.WithDescription("Deliveries that reached a final state: delivered, failed, expired, endpoint_deleted."))
	in.inFlight, errs[3] = m.Int64UpDownCounter("hookline.dispatcher.in_flight", metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts in flight, per endpoint."))
	in.retries, errs[4] = m.Int64Counter("hookline.dispatcher.retries", metric.WithUnit("{retry}"),
		metric.WithDescription("Retries scheduled after a transient failure, by attempt number of the failed attempt."))
	in.deferrals, errs[5] = m.Int64Counter("hookline.dispatcher.deferrals", metric.WithUnit("{delivery}"),
		metric.WithDescription("Deliveries deferred without an attempt, by reason: concurrency cap, rate limit, endpoint paused, outage."))
	for _, err := range errs {
		if err != nil {
			return in, fmt.Errorf("dispatcher: metrics: %w", err)
		}
	}
	return in, nil
}

// startProcess starts the span of handling one delivery record: a child
// of the delivery's origin (the traceparent in its headers), linked to
// its last attempt.
func (s *Service) startProcess(ctx context.Context, r *kgo.Record) (context.Context, trace.Span) {
	ctx = telemetry.RecordContext(ctx, r)
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			semconv.MessagingSystemKafka,
			semconv.MessagingOperationTypeProcess,
			semconv.MessagingOperationName("process"),
			semconv.MessagingDestinationName(r.Topic),
			semconv.MessagingDestinationPartitionID(strconv.Itoa(int(r.Partition))),
			semconv.MessagingKafkaOffset(int(r.Offset)),
			semconv.MessagingConsumerGroupName(s.cfg.Group),
		),
	}
	if v := header(r, headerLastAttempt); v != "" {
		last := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": v})
		if sc := trace.SpanContextFromContext(last); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{attribute.String("hookline.link", "previous attempt")}}))
		}
	}
	return s.tracer.Start(ctx, "process "+r.Topic, opts...)
}

// deliveryAttributes name a delivery on spans.
func deliveryAttributes(d *hooklinev1.Delivery) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("hookline.event_id", d.GetEventId()),
		attribute.String("hookline.delivery_id", d.GetDeliveryId()),
		attribute.String("hookline.endpoint_id", d.GetEndpointId()),
		attribute.String("hookline.event_type", d.GetEventType()),
		attribute.Int("hookline.attempt", int(d.GetAttempt())),
		attribute.String("hookline.delivery.kind", d.GetKind().String()),
	}
}

// setOutcome records what became of the delivery on the process span.
func setOutcome(ctx context.Context, outcome string) {
	trace.SpanFromContext(ctx).SetAttributes(attribute.String("hookline.outcome", outcome))
}

// stampTrace makes the records that carry r's delivery on (retries,
// deferrals, requeues, dead letters) carry its trace headers, unless
// they set their own.
func (s *Service) stampTrace(r *kgo.Record, outs []*kgo.Record) {
	for _, o := range outs {
		if o.Topic != s.topics.Retries && o.Topic != s.topics.Deliveries && o.Topic != s.topics.Dead {
			continue
		}
		for _, k := range traceHeaders {
			if header(o, k) == "" {
				if v := header(r, k); v != "" {
					o.Headers = append(o.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
				}
			}
		}
	}
}

// resultRecords encodes res for the results topic as the report of the
// span in ctx (the attempt's HTTP span, or the process span when no
// attempt was made): its trace_id and span_id fields and the record's
// traceparent header name that span.
func (s *Service) resultRecords(ctx context.Context, res *hooklinev1.AttemptResult) []*kgo.Record {
	sc := trace.SpanContextFromContext(ctx)
	if sc.IsValid() {
		res.TraceId, res.SpanId = sc.TraceID().String(), sc.SpanID().String()
	}
	out := s.records(s.topics.Results, res.GetEndpointId(), res)
	if sc.IsValid() {
		telemetry.Propagator.Inject(ctx, kotel.NewRecordCarrier(out[0]))
	}
	return out
}

// traceparent formats sc as a W3C traceparent value.
func traceparent(sc trace.SpanContext) string {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), c)
	return c["traceparent"]
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
