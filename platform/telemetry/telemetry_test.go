package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestOffByDefault(t *testing.T) {
	tel, err := Setup(t.Context(), "hookline-test", WithGetenv(env()))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tel.TracerProvider.(tracenoop.TracerProvider); !ok {
		t.Errorf("tracer provider %T with no OTEL_* settings, want the no-op one", tel.TracerProvider)
	}
	if _, ok := tel.MeterProvider.(metricnoop.MeterProvider); !ok {
		t.Errorf("meter provider %T with no OTEL_* settings, want the no-op one", tel.MeterProvider)
	}
	if KafkaClientMetrics(tel.MeterProvider) != nil {
		t.Error("Kafka client metrics hooks installed with metrics off")
	}
}

func TestExporting(t *testing.T) {
	for _, c := range []struct {
		env    func(string) string
		signal string
		want   bool
	}{
		{env(), "TRACES", false},
		{env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"), "TRACES", true},
		{env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"), "METRICS", true},
		{env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318"), "METRICS", false},
		{env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318", "OTEL_METRICS_EXPORTER", "none"), "METRICS", false},
		{env("OTEL_TRACES_EXPORTER", "console"), "TRACES", true},
	} {
		if got := exporting(c.env, c.signal); got != c.want {
			t.Errorf("exporting(%s) = %v, want %v", c.signal, got, c.want)
		}
	}
}

func TestSDKDisabled(t *testing.T) {
	tel, err := Setup(t.Context(), "hookline-test", WithGetenv(env("OTEL_SDK_DISABLED", "true")), WithPrometheus())
	if err != nil {
		t.Fatal(err)
	}
	if tel.MetricsHandler() != nil {
		t.Error("metrics handler with OTEL_SDK_DISABLED=true")
	}
}

func TestLogLinesCarryTraceIDs(t *testing.T) {
	var buf bytes.Buffer
	log, err := NewLogger(&buf, "info")
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("t").Start(context.Background(), "op")
	log.InfoContext(ctx, "retry scheduled", "attempt", 2)
	span.End()
	log.Info("no span")
	dec := json.NewDecoder(&buf)
	var first, second map[string]any
	if err := dec.Decode(&first); err != nil {
		t.Fatal(err)
	}
	if err := dec.Decode(&second); err != nil {
		t.Fatal(err)
	}
	sc := span.SpanContext()
	if first["trace_id"] != sc.TraceID().String() || first["span_id"] != sc.SpanID().String() || first["attempt"] != float64(2) {
		t.Errorf("line in a span: %v", first)
	}
	if _, ok := second["trace_id"]; ok {
		t.Errorf("line outside a span has a trace id: %v", second)
	}
	if _, err := NewLogger(&buf, "loud"); err == nil {
		t.Error("log level \"loud\" accepted")
	}
}

func TestLag(t *testing.T) {
	r := sdkmetric.NewManualReader()
	lag, err := NewLag(sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)), "g")
	if err != nil {
		t.Fatal(err)
	}
	defer lag.Close()
	part := func(p int32, hwm, lso int64, offsets ...int64) kgo.FetchPartition {
		fp := kgo.FetchPartition{Partition: p, HighWatermark: hwm, LastStableOffset: lso}
		for _, o := range offsets {
			fp.Records = append(fp.Records, &kgo.Record{Topic: "d", Partition: p, Offset: o})
		}
		return fp
	}
	lag.Observe(kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "d", Partitions: []kgo.FetchPartition{
		part(0, 100, 100, 10, 11), // next 12: 88 behind
		part(1, 50, 40, 30),       // read_committed: LSO 40, next 31: 9 behind
		part(2, 7, -1, 6),         // caught up
	}}}}})
	if got := gauge(t, r); got != 97 {
		t.Errorf("lag %d, want 97", got)
	}
	lag.Forget(map[string][]int32{"d": {0}})
	if got := gauge(t, r); got != 9 {
		t.Errorf("lag after revoking partition 0: %d, want 9", got)
	}
}

func gauge(t *testing.T, r *sdkmetric.ManualReader) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if g, ok := m.Data.(metricdata.Gauge[int64]); ok && m.Name == "hookline.kafka.consumer.lag" {
				var sum int64
				for _, p := range g.DataPoints {
					sum += p.Value
				}
				return sum
			}
		}
	}
	t.Fatal("no hookline.kafka.consumer.lag")
	return 0
}
