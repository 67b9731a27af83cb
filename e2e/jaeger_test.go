package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/telemetry"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
)

// envJaeger names the query API of a running Jaeger (make test-jaeger
// starts one); the OTLP exporter is configured by the standard
// OTEL_EXPORTER_OTLP_ENDPOINT, exactly as for the service binaries.
const envJaeger = "HOOKLINE_TEST_JAEGER"

// jaegerTrace is the part of Jaeger's /api/traces answer the test reads.
type jaegerTrace struct {
	TraceID string `json:"traceID"`
	Spans   []struct {
		SpanID        string `json:"spanID"`
		OperationName string `json:"operationName"`
		ProcessID     string `json:"processID"`
		Tags          []struct {
			Key   string `json:"key"`
			Value any    `json:"value"`
		} `json:"tags"`
	} `json:"spans"`
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
	} `json:"processes"`
}

// TestTraceFoundInJaeger sends one delivery (failed once, then delivered)
// through Hookline exporting over OTLP to a real Jaeger, then finds the
// trace through Jaeger's query API by the hookline.event_id attribute and
// checks it holds all three services and both attempts.
func TestTraceFoundInJaeger(t *testing.T) {
	query := os.Getenv(envJaeger)
	if query == "" {
		t.Skipf("set %s to a Jaeger query URL (make test-jaeger)", envJaeger)
	}
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" {
		t.Fatal("OTEL_EXPORTER_OTLP_ENDPOINT is not set: nothing would reach Jaeger")
	}
	tels := map[string]*telemetry.Telemetry{}
	for _, svc := range []string{"ingest", "dispatcher", "scheduler"} {
		tel, err := telemetry.Setup(t.Context(), "hookline-"+svc, telemetry.WithoutMetrics())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
		tels[svc] = tel
	}
	st := startStack(t, func(c *stackConfig) {
		c.telemetry = func(svc string) (trace.TracerProvider, metric.MeterProvider) {
			return tels[svc].TracerProvider, metricnoop.NewMeterProvider()
		}
	})
	var calls atomic.Int32
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer rx.Close()
	st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, RetryPolicy: ladderPolicy(2, 200*time.Millisecond)})
	pub := st.publish("invoice.paid", `{"n":1}`)
	st.readN(st.topics.Results, 2)
	for _, tel := range tels {
		if err := tel.Flush(t.Context()); err != nil {
			t.Fatalf("export to %s: %v", os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), err)
		}
	}

	// Jaeger indexes what it received asynchronously: ask until the whole
	// trace is there, bounded.
	q := url.Values{
		"service":  {"hookline-ingest"},
		"tags":     {fmt.Sprintf(`{"hookline.event_id":%q}`, pub.GetEventId())},
		"lookback": {"1h"},
		"limit":    {"5"},
	}
	u := query + "/api/traces?" + q.Encode()
	var tr jaegerTrace
	var missing string
	deadline := time.Now().Add(30 * time.Second)
	for {
		tr, missing = fetchTrace(t, u)
		if missing == "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if missing != "" {
		t.Fatalf("Jaeger (%s) has no complete trace for event %s: %s", u, pub.GetEventId(), missing)
	}
	t.Logf("found trace %s for event %s: %d spans", tr.TraceID, pub.GetEventId(), len(tr.Spans))
}

// fetchTrace asks Jaeger for the trace and says what is still missing
// from it: the services, the RPC span, two POST attempts 1 and 2.
func fetchTrace(t *testing.T, u string) (jaegerTrace, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		return jaegerTrace{}, err.Error()
	}
	defer resp.Body.Close()
	var body struct {
		Data []jaegerTrace `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return jaegerTrace{}, fmt.Sprintf("%s: %v", resp.Status, err)
	}
	if len(body.Data) != 1 {
		return jaegerTrace{}, fmt.Sprintf("%d traces match", len(body.Data))
	}
	tr := body.Data[0]
	var services []string
	for _, p := range tr.Processes {
		services = append(services, p.ServiceName)
	}
	for _, want := range []string{"hookline-ingest", "hookline-dispatcher", "hookline-scheduler"} {
		if !slices.Contains(services, want) {
			return tr, "no span from " + want
		}
	}
	var attempts []string
	rpc := false
	for _, s := range tr.Spans {
		rpc = rpc || s.OperationName == "hookline.v1.EventService/PublishEvent"
		if s.OperationName != "POST" {
			continue
		}
		for _, tag := range s.Tags {
			if tag.Key == "hookline.attempt" {
				attempts = append(attempts, fmt.Sprint(tag.Value))
			}
		}
	}
	slices.Sort(attempts)
	if !rpc {
		return tr, "no PublishEvent span"
	}
	if !slices.Equal(attempts, []string{"1", "2"}) {
		return tr, fmt.Sprintf("POST spans with attempts %v, want [1 2]", attempts)
	}
	return tr, ""
}
