// Package telemetry is the one home of Hookline's OpenTelemetry set-up:
// tracer and meter providers built from the standard OTEL_* environment,
// the Prometheus /metrics endpoint, the W3C propagator, the slog handler
// that stamps trace ids on log lines, Kafka client instrumentation and the
// consumer-lag gauge.
//
// Off by default: with no OTEL_* exporter settings and no metrics address
// the providers are the no-op ones, which cost a branch per call. Trace
// context still flows (a no-op span carries its parent's span context), so
// a producer's traceparent reaches receivers even when Hookline exports
// nothing itself.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"github.com/hookline/hookline/platform/supervise"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// Propagator is the W3C trace-context and baggage propagator every
// Hookline hop uses: gRPC metadata, Kafka record headers, HTTP requests to
// receivers.
var Propagator propagation.TextMapPropagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Config is the telemetry section of every service binary's
// configuration. Exporters and sampling are configured by the standard
// OTEL_* variables (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL,
// OTEL_TRACES_EXPORTER, OTEL_METRICS_EXPORTER, OTEL_TRACES_SAMPLER,
// OTEL_TRACES_SAMPLER_ARG, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES),
// read by the OpenTelemetry SDK as its specification says.
type Config struct {
	MetricsAddr string `flag:"metrics-addr" env:"HOOKLINE_METRICS_ADDR" usage:"listen address of the Prometheus /metrics endpoint, e.g. 127.0.0.1:9464 (default: no endpoint)"`
	LogLevel    string `flag:"log-level" env:"HOOKLINE_LOG_LEVEL" default:"info" usage:"debug, info, warn or error"`
	PprofAddr   string `flag:"pprof-addr" env:"HOOKLINE_PPROF_ADDR" usage:"loopback listen address of the Go profiler (/debug/pprof/), e.g. 127.0.0.1:6060 (default: off)"`
}

// Telemetry is one service's set of providers. Its methods are safe for
// concurrent use.
type Telemetry struct {
	// TracerProvider is the SDK provider when traces are exported, the
	// no-op provider otherwise.
	TracerProvider trace.TracerProvider
	// MeterProvider is the SDK provider when metrics are read (Prometheus
	// or OTLP), the no-op provider otherwise.
	MeterProvider metric.MeterProvider

	// LoggerProvider is the OpenTelemetry logs SDK's provider when logs
	// are exported (OTLP), nil otherwise; Start bridges the service's
	// slog logger to it.
	LoggerProvider *sdklog.LoggerProvider

	metrics  http.Handler
	flush    []func(context.Context) error
	shutdown []func(context.Context) error
}

// Option configures Setup.
type Option func(*setup)

type setup struct {
	getenv     func(string) string
	noMetrics  bool
	prometheus bool
}

// WithGetenv replaces os.Getenv for deciding which exporters are on (the
// exporters themselves read the process environment).
func WithGetenv(getenv func(string) string) Option { return func(s *setup) { s.getenv = getenv } }

// WithoutMetrics leaves metrics off (the no-op meter provider); a
// program running several services in one process shares one meter
// provider among them.
func WithoutMetrics() Option { return func(s *setup) { s.noMetrics = true } }

// WithPrometheus adds a Prometheus reader; MetricsHandler then serves it.
func WithPrometheus() Option { return func(s *setup) { s.prometheus = true } }

// Setup builds the providers of service (its service.name, unless
// OTEL_SERVICE_NAME says otherwise). Traces are exported when
// OTEL_TRACES_EXPORTER names an exporter or an OTLP endpoint is set;
// logs on the same terms (OTEL_LOGS_EXPORTER); metrics go to OTLP on the
// same terms (OTEL_METRICS_EXPORTER) and to Prometheus with
// WithPrometheus. OTEL_SDK_DISABLED=true turns all of it
// off. Call Shutdown to flush.
func Setup(ctx context.Context, service string, opts ...Option) (*Telemetry, error) {
	s := setup{getenv: osGetenv}
	for _, o := range opts {
		o(&s)
	}
	t := &Telemetry{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider()}
	if strings.EqualFold(s.getenv("OTEL_SDK_DISABLED"), "true") {
		return t, nil
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(service), semconv.ServiceNamespace("hookline")),
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}

	var spans []sdktrace.SpanProcessor
	if exporting(s.getenv, "TRACES") {
		exp, err := autoexport.NewSpanExporter(ctx)
		if err != nil {
			return nil, fmt.Errorf("telemetry: span exporter (OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_*): %w", err)
		}
		if !autoexport.IsNoneSpanExporter(exp) {
			spans = append(spans, sdktrace.NewBatchSpanProcessor(exp))
		}
	}
	if len(spans) > 0 {
		topts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)} // sampler: OTEL_TRACES_SAMPLER, default parentbased_always_on
		for _, p := range spans {
			topts = append(topts, sdktrace.WithSpanProcessor(p))
		}
		tp := sdktrace.NewTracerProvider(topts...)
		t.TracerProvider = tp
		t.flush = append(t.flush, tp.ForceFlush)
		t.shutdown = append(t.shutdown, tp.Shutdown)
	}

	if exporting(s.getenv, "LOGS") {
		exp, err := autoexport.NewLogExporter(ctx)
		if err != nil {
			return nil, fmt.Errorf("telemetry: log exporter (OTEL_LOGS_EXPORTER, OTEL_EXPORTER_OTLP_*): %w", err)
		}
		if !autoexport.IsNoneLogExporter(exp) {
			lp := sdklog.NewLoggerProvider(sdklog.WithResource(res), sdklog.WithProcessor(sdklog.NewBatchProcessor(exp)))
			t.LoggerProvider = lp
			t.flush = append(t.flush, lp.ForceFlush)
			t.shutdown = append(t.shutdown, lp.Shutdown)
		}
	}

	if s.noMetrics {
		return t, nil
	}
	var readers []sdkmetric.Reader
	if s.prometheus {
		reg := prometheus.NewRegistry()
		r, err := otelprom.New(otelprom.WithRegisterer(reg))
		if err != nil {
			return nil, fmt.Errorf("telemetry: prometheus: %w", err)
		}
		readers = append(readers, r)
		t.metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	}
	if exporting(s.getenv, "METRICS") {
		r, err := autoexport.NewMetricReader(ctx)
		if err != nil {
			return nil, fmt.Errorf("telemetry: metric reader (OTEL_METRICS_EXPORTER, OTEL_EXPORTER_OTLP_*): %w", err)
		}
		if !autoexport.IsNoneMetricReader(r) {
			readers = append(readers, r)
		}
	}
	if len(readers) > 0 {
		mopts := []sdkmetric.Option{sdkmetric.WithResource(res)}
		for _, r := range readers {
			mopts = append(mopts, sdkmetric.WithReader(r))
		}
		mp := sdkmetric.NewMeterProvider(mopts...)
		t.MeterProvider = mp
		t.flush = append(t.flush, mp.ForceFlush)
		t.shutdown = append(t.shutdown, mp.Shutdown)
	}
	return t, nil
}

// exporting reports whether the environment asks for signal ("TRACES",
// "METRICS" or "LOGS") to be exported: its OTEL_<signal>_EXPORTER names one other
// than "none", or an OTLP endpoint is set.
func exporting(getenv func(string) string, signal string) bool {
	if e := getenv("OTEL_" + signal + "_EXPORTER"); e != "" {
		return e != "none"
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT") != ""
}

// Tracing reports whether spans are recorded and exported.
func (t *Telemetry) Tracing() bool {
	_, off := t.TracerProvider.(tracenoop.TracerProvider)
	return !off
}

// MetricsHandler serves the Prometheus exposition; nil without
// WithPrometheus.
func (t *Telemetry) MetricsHandler() http.Handler { return t.metrics }

// serveMetrics serves /metrics on ln until ctx ends.
func (t *Telemetry) serveMetrics(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", t.metrics)
	return serveHTTP(ctx, ln, mux, "metrics")
}

// Flush exports what is buffered.
func (t *Telemetry) Flush(ctx context.Context) error {
	var errs []error
	for _, f := range t.flush {
		errs = append(errs, f(ctx))
	}
	return errors.Join(errs...)
}

// Shutdown flushes and stops the providers; call it last, after the
// service stopped.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	var errs []error
	for _, f := range t.shutdown {
		errs = append(errs, f(ctx))
	}
	return errors.Join(errs...)
}

// Env is what a service binary hands its service: the logger and the
// providers.
type Env struct {
	Log       *slog.Logger
	Telemetry *Telemetry
	// metrics is the /metrics listener; nil for none.
	metrics net.Listener
	// pprof is the /debug/pprof/ listener; nil for none.
	pprof net.Listener
}

// Start sets up a service binary's logging (JSON to w at cfg.LogLevel,
// with trace ids, and to the OpenTelemetry logs SDK as well when logs
// are exported) and telemetry (OTEL_* environment, and Prometheus when
// cfg.MetricsAddr is set, listening already so a busy port fails here),
// and the profiler when cfg.PprofAddr is set (a loopback address).
func Start(ctx context.Context, service string, cfg Config, w io.Writer) (Env, error) {
	log, err := NewLogger(w, cfg.LogLevel)
	if err != nil {
		return Env{}, fmt.Errorf("--log-level: %w", err)
	}
	var opts []Option
	if cfg.MetricsAddr != "" {
		opts = append(opts, WithPrometheus())
	}
	t, err := Setup(ctx, service, opts...)
	if err != nil {
		return Env{}, err
	}
	if t.LoggerProvider != nil {
		log = bridgeLogs(log, service, t.LoggerProvider, cfg.LogLevel)
	}
	env := Env{Log: log, Telemetry: t}
	if cfg.MetricsAddr != "" && t.metrics != nil {
		if env.metrics, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
			return Env{}, fmt.Errorf("--metrics-addr: %w", err)
		}
	}
	if cfg.PprofAddr != "" {
		if env.pprof, err = listenPprof(cfg.PprofAddr); err != nil {
			if env.metrics != nil {
				_ = env.metrics.Close()
			}
			return Env{}, err
		}
	}
	return env, nil
}

// MetricsAddr is the address /metrics is served on; empty for none.
func (e Env) MetricsAddr() string {
	if e.metrics == nil {
		return ""
	}
	return e.metrics.Addr().String()
}

// PprofAddr is the address /debug/pprof/ is served on; empty for none.
func (e Env) PprofAddr() string {
	if e.pprof == nil {
		return ""
	}
	return e.pprof.Addr().String()
}

// Serve serves /metrics and /debug/pprof/ (those that have an address)
// until ctx ends; with neither it just waits for ctx. Either failing
// stops both.
func (e Env) Serve(ctx context.Context) error {
	var parts []supervise.Part
	if e.metrics != nil {
		parts = append(parts, supervise.Part{Name: "metrics endpoint", Run: func(ctx context.Context) error { return e.Telemetry.serveMetrics(ctx, e.metrics) }})
	}
	if e.pprof != nil {
		parts = append(parts, supervise.Part{Name: "pprof endpoint", Run: func(ctx context.Context) error { return serveHTTP(ctx, e.pprof, PprofHandler(), "pprof") }})
	}
	if len(parts) == 0 {
		<-ctx.Done()
		return nil
	}
	return supervise.Run(ctx, parts...)
}

// Run runs service until ctx ends, serving /metrics and /debug/pprof/
// beside it; either failing stops both.
func (e Env) Run(ctx context.Context, service func(context.Context) error) error {
	if e.metrics == nil && e.pprof == nil {
		return service(ctx)
	}
	if e.metrics != nil {
		e.Log.Info("metrics endpoint", "url", "http://"+e.MetricsAddr()+"/metrics")
	}
	if e.pprof != nil {
		e.Log.Info("pprof endpoint", "url", "http://"+e.PprofAddr()+"/debug/pprof/")
	}
	// The endpoints first, so they are stopped last: a draining service
	// is still observed.
	return supervise.Run(ctx, supervise.Part{Run: e.Serve}, supervise.Part{Run: service})
}
