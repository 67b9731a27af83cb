package dispatcher

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/classify"
	"github.com/hookline/hookline/platform/telemetry"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
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

// instruments are the dispatcher's metrics. With metrics off (the no-op
// provider) its methods return at once, building no attributes.
type instruments struct {
	on         bool
	attempts   metric.Int64Counter
	duration   metric.Float64Histogram
	deliveries metric.Int64Counter
	retries    metric.Int64Counter
	deferrals  metric.Int64Counter
	aborts     metric.Int64Counter
	reused     metric.Int64Counter
	// inFlight backs the per-endpoint in-flight gauge, an observable
	// instrument so that an endpoint's series goes away when prune
	// forgets it (a synchronous one keeps every series it ever saw).
	inFlight *flightGauge
}

// flightGauge counts attempts in flight per endpoint. Safe for
// concurrent use.
type flightGauge struct {
	mu sync.Mutex
	m  map[string]*flightCount
}

type flightCount struct {
	n    int64
	used bool // changed since the last prune
}

// prune forgets endpoints with nothing in flight that are gone or did
// not change since the last prune: their series stop being reported.
func (g *flightGauge) prune(gone func(id string) bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for id, c := range g.m {
		if c.n == 0 && (!c.used || gone(id)) {
			delete(g.m, id)
			continue
		}
		c.used = false
	}
}

func (g *flightGauge) len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.m)
}

func newInstruments(mp metric.MeterProvider, mem func() Memory) (instruments, error) {
	m := mp.Meter(scope)
	_, off := mp.(metricnoop.MeterProvider)
	in := instruments{on: !off, inFlight: &flightGauge{m: map[string]*flightCount{}}}
	var errs [9]error
	in.attempts, errs[0] = m.Int64Counter("hookline.dispatcher.attempts", metric.WithUnit("{attempt}"),
		metric.WithDescription("HTTP attempts made, by outcome class (success, transient, permanent, ambiguous)."))
	in.duration, errs[1] = m.Float64Histogram("hookline.dispatcher.attempt.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from sending an attempt to its last response byte read, by outcome class."),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
	in.deliveries, errs[2] = m.Int64Counter("hookline.dispatcher.deliveries", metric.WithUnit("{delivery}"),
		metric.WithDescription("Deliveries that reached a final state: delivered, failed, expired, endpoint_deleted."))
	_, errs[3] = m.Int64ObservableUpDownCounter("hookline.dispatcher.in_flight", metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts in flight, per endpoint."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			g := in.inFlight
			g.mu.Lock()
			defer g.mu.Unlock()
			for id, c := range g.m {
				o.Observe(c.n, metric.WithAttributes(attribute.String("hookline.endpoint_id", id)))
			}
			return nil
		}))
	in.retries, errs[4] = m.Int64Counter("hookline.dispatcher.retries", metric.WithUnit("{retry}"),
		metric.WithDescription("Retries scheduled after a transient failure, by attempt number of the failed attempt."))
	in.deferrals, errs[5] = m.Int64Counter("hookline.dispatcher.deferrals", metric.WithUnit("{delivery}"),
		metric.WithDescription("Deliveries deferred without an attempt, by reason: concurrency cap, rate limit, endpoint paused, outage."))
	in.aborts, errs[6] = m.Int64Counter("hookline.dispatcher.commit.aborts", metric.WithUnit("{transaction}"),
		metric.WithDescription("Commits aborted, by reason: unwritable (a record Kafka will never take; its delivery is dead-lettered without it), refused (Kafka refuses the writes: authorization, topic), transient."))
	in.reused, errs[7] = m.Int64Counter("hookline.dispatcher.answers.reused", metric.WithUnit("{delivery}"),
		metric.WithDescription("Deliveries settled from a 2xx their receiver gave before their settlement was lost (an outage or a lost partition), instead of a new request."))
	errs[8] = windowGauges(m, mem)
	for _, err := range errs {
		if err != nil {
			return in, fmt.Errorf("dispatcher: metrics: %w", err)
		}
	}
	return in, nil
}

// attempt counts an attempt made, by outcome class, and its latency.
func (in instruments) attempt(ctx context.Context, c hooklinev1.OutcomeClass, latency time.Duration) {
	if !in.on {
		return
	}
	class := metric.WithAttributes(attribute.String("hookline.outcome.class", classify.Label(c)))
	in.attempts.Add(ctx, 1, class)
	in.duration.Record(ctx, latency.Seconds(), class)
}

// flight adds delta to the endpoint's attempts in flight.
func (in instruments) flight(ctx context.Context, endpointID string, delta int64) {
	if !in.on {
		return
	}
	g := in.inFlight
	g.mu.Lock()
	c := g.m[endpointID]
	if c == nil {
		c = &flightCount{}
		g.m[endpointID] = c
	}
	c.n += delta
	c.used = true
	g.mu.Unlock()
}

// abort counts an aborted commit.
func (in instruments) abort(reason string) {
	if in.on {
		in.aborts.Add(context.Background(), 1, metric.WithAttributes(attribute.String("reason", reason)))
	}
}

// reuse counts a delivery settled from an answer its receiver gave
// before (answered.go).
func (in instruments) reuse(ctx context.Context) {
	if in.on {
		in.reused.Add(ctx, 1)
	}
}

// retry counts a retry scheduled after the failed attempt n.
func (in instruments) retry(ctx context.Context, n uint32) {
	if in.on {
		in.retries.Add(ctx, 1, metric.WithAttributes(attribute.Int("hookline.attempt", int(n))))
	}
}

// deferral counts a delivery held without an attempt.
func (in instruments) deferral(ctx context.Context, reason string) {
	if in.on {
		in.deferrals.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", reason)))
	}
}

// delivery counts a delivery that reached the final state st.
func (in instruments) delivery(ctx context.Context, st hooklinev1.DeliveryState) {
	if in.on {
		in.deliveries.Add(ctx, 1, metric.WithAttributes(attribute.String("hookline.delivery.state", outcomeLabel(st))))
	}
}

// outcomeLabel is a delivery state as a metric or span label:
// DELIVERY_STATE_RETRY_SCHEDULED becomes "retry_scheduled".
func outcomeLabel(st hooklinev1.DeliveryState) string {
	return strings.ToLower(strings.TrimPrefix(st.String(), "DELIVERY_STATE_"))
}

// startProcess starts the span of handling one delivery record: a child
// of the delivery's origin (the traceparent in its headers), linked to
// its last attempt. Attributes and links are built only when the span is
// recorded.
func (h *handler) startProcess(ctx context.Context, r *kgo.Record) (context.Context, trace.Span) {
	ctx = telemetry.RecordContext(ctx, r)
	ctx, span := h.tracer.Start(ctx, h.processSpan, trace.WithSpanKind(trace.SpanKindConsumer))
	if !span.IsRecording() {
		return ctx, span
	}
	span.SetAttributes(
		semconv.MessagingSystemKafka,
		semconv.MessagingOperationTypeProcess,
		semconv.MessagingOperationName("process"),
		semconv.MessagingDestinationName(r.Topic),
		semconv.MessagingDestinationPartitionID(strconv.Itoa(int(r.Partition))),
		semconv.MessagingKafkaOffset(int(r.Offset)),
		semconv.MessagingConsumerGroupName(h.cfg.Group),
	)
	if v := header(r, headerLastAttempt); v != "" {
		last := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": v})
		if sc := trace.SpanContextFromContext(last); sc.IsValid() {
			span.AddLink(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{attribute.String("hookline.link", "previous attempt")}})
		}
	}
	return ctx, span
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
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.String("hookline.outcome", outcome))
	}
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

// windowGauges reports the window against its budget, as of the loop's
// last memory report: what an operator reads when throughput drops with
// receivers slow (a window full of deliveries held behind attempts in
// flight pauses fetching; --window-records, --window-bytes).
func windowGauges(m metric.Meter, mem func() Memory) error {
	deliveries, err := m.Int64ObservableGauge("hookline.dispatcher.window.deliveries", metric.WithUnit("{delivery}"),
		metric.WithDescription("Deliveries the window holds (polled, not yet committed), against --window-records."))
	if err != nil {
		return err
	}
	bytes, err := m.Int64ObservableGauge("hookline.dispatcher.window.bytes", metric.WithUnit("By"),
		metric.WithDescription("Bytes the window holds, against --window-bytes."))
	if err != nil {
		return err
	}
	paused, err := m.Int64ObservableGauge("hookline.dispatcher.window.fetch_paused", metric.WithUnit("{partition}"),
		metric.WithDescription("Partitions whose fetching is paused for holding more than their share of the window."))
	if err != nil {
		return err
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		r := mem()
		o.ObserveInt64(deliveries, int64(r.WindowRecords))
		o.ObserveInt64(bytes, r.WindowBytes)
		o.ObserveInt64(paused, int64(r.FetchPaused))
		return nil
	}, deliveries, bytes, paused)
	return err
}
