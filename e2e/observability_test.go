package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/kafkatest"
	"github.com/hookline/hookline/platform/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc/metadata"
)

// inMemoryTracing gives every service of a stack its own tracer provider
// (service.name hookline-<service>) exporting synchronously to one
// in-memory exporter.
func inMemoryTracing(t *testing.T) (*tracetest.InMemoryExporter, <-chan sdktrace.ReadOnlySpan, func(*stackConfig)) {
	spans := tracetest.NewInMemoryExporter()
	ended := endedSpans{make(chan sdktrace.ReadOnlySpan, 1000)}
	tps := map[string]*sdktrace.TracerProvider{}
	for _, svc := range []string{"ingest", "dispatcher", "scheduler"} {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans), sdktrace.WithSpanProcessor(ended),
			sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "hookline-"+svc))))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		tps[svc] = tp
	}
	return spans, ended.c, func(c *stackConfig) {
		c.telemetry = func(svc string) (trace.TracerProvider, metric.MeterProvider) {
			return tps[svc], metricnoop.NewMeterProvider()
		}
	}
}

// TestOneTracePerDeliveryAcrossRetries is [observability]'s acceptance:
// a receiver that fails twice then succeeds yields one trace, under the
// producer's own span, holding the ingest RPC span, the Kafka publish
// span, and three attempt spans (attempts 1..3 with their status codes),
// each attempt's receiver having seen a traceparent naming its span, and
// each result record naming it too.
func TestOneTracePerDeliveryAcrossRetries(t *testing.T) {
	spans, ended, withTracing := inMemoryTracing(t)
	st := startStack(t, withTracing)

	var mu sync.Mutex
	var seen []string // traceparent per request
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("traceparent"))
		n := len(seen)
		mu.Unlock()
		if n <= 2 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rx.Close()
	st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL + "/hooks?token=secret", RetryPolicy: ladderPolicy(3, 200*time.Millisecond, 200*time.Millisecond)})

	// The producer's own span, sent as any language's OTel SDK would.
	producerTrace, producerSpan := "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	ctx := metadata.AppendToOutgoingContext(st.ctx(), "traceparent", "00-"+producerTrace+"-"+producerSpan+"-01")
	pub, err := st.events().PublishEvent(ctx, &hooklinev1.PublishEventRequest{EventType: "invoice.paid", Payload: []byte(`{"n":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	results := kafkatest.Decode(t, st.readN(st.topics.Results, 3), func() *hooklinev1.AttemptResult { return new(hooklinev1.AttemptResult) })

	// The RPC's server span ends just after the client has its answer.
	timeout := time.After(waitFor)
	for rpcEnded := false; !rpcEnded; {
		select {
		case s := <-ended:
			rpcEnded = s.SpanKind() == trace.SpanKindServer && strings.HasSuffix(s.Name(), "/PublishEvent")
		case <-timeout:
			t.Fatal("the PublishEvent span never ended")
		}
	}
	got := spans.GetSpans()

	byKind := func(k trace.SpanKind, nameHas string) []tracetest.SpanStub {
		var out []tracetest.SpanStub
		for _, s := range got {
			if s.SpanKind == k && strings.Contains(s.Name, nameHas) {
				out = append(out, s)
			}
		}
		return out
	}
	for _, s := range got {
		if strings.Contains(s.Name, "EndpointService") || strings.Contains(s.Name, st.topics.Endpoints) {
			continue // the endpoint's creation: its own trace
		}
		if s.SpanContext.TraceID().String() != producerTrace {
			t.Errorf("span %q (%s) is in trace %s, want the producer's %s", s.Name, s.Resource.Attributes(), s.SpanContext.TraceID(), producerTrace)
		}
	}
	server := one(t, byKind(trace.SpanKindServer, "PublishEvent"), "ingest RPC span")
	if server.Parent.SpanID().String() != producerSpan {
		t.Errorf("RPC span's parent is %s, want the producer's span %s", server.Parent.SpanID(), producerSpan)
	}
	if v := attr(server.Attributes, "hookline.event_id"); v != pub.GetEventId() {
		t.Errorf("RPC span hookline.event_id = %q, want %q", v, pub.GetEventId())
	}
	publish := one(t, byKind(trace.SpanKindProducer, st.topics.Deliveries+" publish"), "Kafka publish span")
	if publish.Parent.SpanID() != server.SpanContext.SpanID() {
		t.Errorf("publish span's parent is %s, want the RPC span", publish.Parent.SpanID())
	}

	process := byKind(trace.SpanKindConsumer, "process "+st.topics.Deliveries)
	attempts := byKind(trace.SpanKindClient, "POST")
	if len(attempts) != 3 || len(process) != 3 {
		t.Fatalf("%d attempt spans and %d process spans, want 3 and 3:\n%s", len(attempts), len(process), names(got))
	}
	slices.SortFunc(attempts, func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) })
	slices.SortFunc(process, func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) })
	wantStatus := []string{"500", "500", "204"}
	for i, a := range attempts {
		n := strconv.Itoa(i + 1)
		if v := attr(a.Attributes, "hookline.attempt"); v != n {
			t.Errorf("attempt span %d: hookline.attempt = %q", i+1, v)
		}
		if v := attr(a.Attributes, "http.response.status_code"); v != wantStatus[i] {
			t.Errorf("attempt span %d: http.response.status_code = %q, want %s", i+1, v, wantStatus[i])
		}
		if v := attr(a.Attributes, "hookline.event_id"); v != pub.GetEventId() {
			t.Errorf("attempt span %d: hookline.event_id = %q", i+1, v)
		}
		if v := attr(a.Attributes, "url.full"); strings.Contains(v, "secret") || !strings.HasSuffix(v, "/hooks") {
			t.Errorf("attempt span %d: url.full = %q: want the URL without its query", i+1, v)
		}
		if wantErr := i < 2; (a.Status.Code == codes.Error) != wantErr {
			t.Errorf("attempt span %d: status %v", i+1, a.Status)
		}
		if a.Parent.SpanID() != process[i].SpanContext.SpanID() {
			t.Errorf("attempt span %d is not a child of its process span", i+1)
		}
		if process[i].Parent.SpanID() != publish.SpanContext.SpanID() {
			t.Errorf("process span %d's parent is %s, want the publish span (the delivery's origin)", i+1, process[i].Parent.SpanID())
		}
		if i > 0 && !slices.ContainsFunc(process[i].Links, func(l sdktrace.Link) bool {
			return l.SpanContext.SpanID() == attempts[i-1].SpanContext.SpanID()
		}) {
			t.Errorf("process span %d does not link to attempt %d's span", i+1, i)
		}
		// What the receiver saw, and what the result record says.
		mu.Lock()
		tp := seen[i]
		mu.Unlock()
		sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp}))
		if !sc.IsValid() || sc.SpanID() != a.SpanContext.SpanID() || sc.TraceID().String() != producerTrace {
			t.Errorf("receiver's traceparent %d = %q, want trace %s span %s", i+1, tp, producerTrace, a.SpanContext.SpanID())
		}
		res := results[i]
		if res.GetAttempt() != uint32(i+1) || res.GetTraceId() != producerTrace || res.GetSpanId() != a.SpanContext.SpanID().String() {
			t.Errorf("result %d: attempt %d trace %s span %s, want attempt %d's span %s", i+1, res.GetAttempt(), res.GetTraceId(), res.GetSpanId(), i+1, a.SpanContext.SpanID())
		}
	}
	releases := byKind(trace.SpanKindInternal, "release "+st.topics.Deliveries)
	if len(releases) != 2 {
		t.Errorf("%d scheduler release spans, want 2 (attempts 2 and 3)", len(releases))
	}
	for _, r := range releases {
		if r.Parent.SpanID() != publish.SpanContext.SpanID() {
			t.Errorf("release span's parent is %s, want the publish span", r.Parent.SpanID())
		}
	}
}

// prometheusTelemetry gives every service of a stack one Prometheus
// meter provider (and no traces), served at the returned URL until the
// test ends: what a test scrapes to read the services' metrics.
func prometheusTelemetry(t *testing.T) (string, func(*stackConfig)) {
	t.Helper()
	tel, err := telemetry.Setup(t.Context(), "hookline-test", telemetry.WithPrometheus(), telemetry.WithGetenv(func(string) string { return "" }))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(tel.MetricsHandler())
	t.Cleanup(srv.Close)
	return srv.URL, func(c *stackConfig) {
		c.telemetry = func(string) (trace.TracerProvider, metric.MeterProvider) {
			return tracenoop.NewTracerProvider(), tel.MeterProvider
		}
	}
}

// TestMetricsCountTheDeliveriesMade scrapes the Prometheus endpoint after
// known deliveries: 3 events to an endpoint that answers 200, one that
// answers 400 and one that answers 503 once per delivery, then 200.
func TestMetricsCountTheDeliveriesMade(t *testing.T) {
	metricsURL, withMetrics := prometheusTelemetry(t)
	st := startStack(t, func(c *stackConfig) {
		withMetrics(c)
		// No rate-limit deferrals: every release is a retry.
		c.dispatcher.RateLimit = 1e6
	})
	ok := newReceiver(t, http.StatusOK)
	bad := newReceiver(t, http.StatusBadRequest)
	var mu sync.Mutex
	tried := map[string]bool{}
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		again := tried[r.Header.Get("webhook-id")]
		tried[r.Header.Get("webhook-id")] = true
		mu.Unlock()
		if !again {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer flaky.Close()
	st.createEndpoint(ok.URL)
	st.createEndpoint(bad.URL)
	st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: flaky.URL, RetryPolicy: ladderPolicy(3, 100*time.Millisecond), OutageModeDisabled: true})
	for i := range 3 {
		st.publish("invoice.paid", fmt.Sprintf(`{"n":%d}`, i))
	}
	st.readN(st.topics.Results, 12) // 3 + 3 + 3×2 attempts

	m := scrape(t, metricsURL)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"hookline_dispatcher_attempts_total", []string{`hookline_outcome_class="success"`}, 6},
		{"hookline_dispatcher_attempts_total", []string{`hookline_outcome_class="permanent"`}, 3},
		{"hookline_dispatcher_attempts_total", []string{`hookline_outcome_class="transient"`}, 3},
		{"hookline_dispatcher_attempt_duration_seconds_count", nil, 12},
		{"hookline_dispatcher_deliveries_total", []string{`hookline_delivery_state="delivered"`}, 6},
		{"hookline_dispatcher_deliveries_total", []string{`hookline_delivery_state="failed"`}, 3},
		{"hookline_dispatcher_retries_total", nil, 3},
		{"hookline_dispatcher_deferrals_total", nil, 0},
		{"hookline_dispatcher_in_flight", nil, 0},
		{"hookline_scheduler_release_lateness_seconds_count", nil, 3},
		{"rpc_server_call_duration_seconds_count", []string{`rpc_method="hookline.v1.EventService/PublishEvent"`}, 3},
	} {
		if got := m.sum(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if !m.has("hookline_dispatcher_in_flight", `hookline_endpoint_id="`) {
		t.Error("no in-flight gauge per endpoint")
	}
	if !m.has("hookline_kafka_consumer_lag", `messaging_destination_name="`+st.topics.Deliveries+`"`) {
		t.Errorf("no consumer lag reported for %s", st.topics.Deliveries)
	}
}

// metrics is a Prometheus text exposition, one sample per line.
type metrics []string

func scrape(t *testing.T, url string) metrics {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("scrape: %s: %s", resp.Status, b)
	}
	var m metrics
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if l := sc.Text(); l != "" && !strings.HasPrefix(l, "#") {
			m = append(m, l)
		}
	}
	return m
}

// sum adds the samples of name whose labels include every one of labels.
func (m metrics) sum(name string, labels ...string) float64 {
	var total float64
	for _, l := range m {
		if !m.match(l, name, labels) {
			continue
		}
		v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
		if err == nil {
			total += v
		}
	}
	return total
}

func (m metrics) has(name string, labels ...string) bool {
	return slices.ContainsFunc(m, func(l string) bool { return m.match(l, name, labels) })
}

func (metrics) match(line, name string, labels []string) bool {
	if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
		return false
	}
	for _, lb := range labels {
		if !strings.Contains(line, lb) {
			return false
		}
	}
	return true
}

func one(t *testing.T, s []tracetest.SpanStub, what string) tracetest.SpanStub {
	t.Helper()
	if len(s) != 1 {
		t.Fatalf("%d %ss, want 1", len(s), what)
	}
	return s[0]
}

func attr(kvs []attribute.KeyValue, key string) string {
	for _, kv := range kvs {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

func names(ss tracetest.SpanStubs) string {
	var b strings.Builder
	for _, s := range ss {
		fmt.Fprintf(&b, "  %s %q parent=%s attempt=%s\n", s.SpanKind, s.Name, s.Parent.SpanID(), attr(s.Attributes, "hookline.attempt"))
	}
	return b.String()
}

// endedSpans passes every span that ends to c (dropping when full).
type endedSpans struct{ c chan sdktrace.ReadOnlySpan }

func (e endedSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (e endedSpans) OnEnd(s sdktrace.ReadOnlySpan) {
	select {
	case e.c <- s:
	default:
	}
}
func (e endedSpans) Shutdown(context.Context) error   { return nil }
func (e endedSpans) ForceFlush(context.Context) error { return nil }
