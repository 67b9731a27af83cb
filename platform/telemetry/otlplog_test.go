package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/trace"
	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/protobuf/proto"
)

// collector is an OTLP/HTTP logs receiver: it keeps every log record
// exported to it.
type collector struct {
	mu      sync.Mutex
	records []*logspb.LogRecord
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req collogs.ExportLogsServiceRequest
	if r.URL.Path != "/v1/logs" || proto.Unmarshal(body, &req) != nil {
		http.Error(w, "not an OTLP logs export", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rl := range req.GetResourceLogs() {
		for _, sl := range rl.GetScopeLogs() {
			c.records = append(c.records, sl.GetLogRecords()...)
		}
	}
	c.mu.Unlock()
	b, _ := proto.Marshal(&collogs.ExportLogsServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(b)
}

// TestLogsReachAnOTLPCollectorWithTheirTraceIDs: with an OTLP endpoint
// set, a service's log records are exported over OTLP as well as
// written as JSON, each with the trace and span ids of the context it
// was logged with, and records below the log level are not.
func TestLogsReachAnOTLPCollectorWithTheirTraceIDs(t *testing.T) {
	col := &collector{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	env, err := Start(t.Context(), "hookline-test", Config{LogLevel: "info"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:     trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8},
		TraceFlags: trace.FlagsSampled,
	})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	env.Log.With("service", "ingest").InfoContext(ctx, "delivery console serving", "addr", "127.0.0.1:7071")
	env.Log.DebugContext(ctx, "below the level")
	if err := env.Telemetry.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.records) != 1 {
		t.Fatalf("the collector got %d log records, want 1: %v", len(col.records), col.records)
	}
	r := col.records[0]
	if r.GetBody().GetStringValue() != "delivery console serving" {
		t.Errorf("body %v", r.GetBody())
	}
	if trace.TraceID(r.GetTraceId()) != sc.TraceID() || trace.SpanID(r.GetSpanId()) != sc.SpanID() {
		t.Errorf("trace %x span %x, want %s %s", r.GetTraceId(), r.GetSpanId(), sc.TraceID(), sc.SpanID())
	}
	attrs := map[string]string{}
	for _, kv := range r.GetAttributes() {
		attrs[kv.GetKey()] = kv.GetValue().GetStringValue()
	}
	if attrs["service"] != "ingest" || attrs["addr"] != "127.0.0.1:7071" {
		t.Errorf("attributes %v, want service and addr", attrs)
	}
}
