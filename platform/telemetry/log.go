package telemetry

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"go.opentelemetry.io/contrib/bridges/otelslog"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/trace"
)

// osGetenv is the one read of OTEL_* variables outside platform/config:
// the OpenTelemetry SDK defines them and reads them itself.
var osGetenv = os.Getenv

// NewLogger returns a JSON logger writing to w at level ("debug", "info",
// "warn" or "error") whose lines carry trace_id and span_id whenever the
// context passed to the logging call holds a span.
func NewLogger(w io.Writer, level string) (*slog.Logger, error) {
	l, err := parseLevel(level)
	if err != nil {
		return nil, err
	}
	return slog.New(TraceHandler(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l}))), nil
}

func parseLevel(level string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return 0, fmt.Errorf("log level %q: use debug, info, warn or error", level)
	}
	return l, nil
}

// bridgeLogs returns log that also hands every record at level or above
// to lp (the OpenTelemetry logs SDK, exporting over OTLP) through the
// otelslog bridge, which takes the trace and span ids from the record's
// context. level was checked by NewLogger.
func bridgeLogs(log *slog.Logger, service string, lp *sdklog.LoggerProvider, level string) *slog.Logger {
	l, _ := parseLevel(level)
	otel := leveled{Handler: otelslog.NewHandler(service, otelslog.WithLoggerProvider(lp)), min: l}
	return slog.New(slog.NewMultiHandler(log.Handler(), otel))
}

// leveled drops records below min.
type leveled struct {
	slog.Handler
	min slog.Level
}

func (h leveled) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h leveled) WithAttrs(as []slog.Attr) slog.Handler {
	return leveled{h.Handler.WithAttrs(as), h.min}
}

func (h leveled) WithGroup(name string) slog.Handler {
	return leveled{h.Handler.WithGroup(name), h.min}
}

// TraceHandler wraps h so that records logged with a context holding a
// valid span context get trace_id and span_id attributes.
func TraceHandler(h slog.Handler) slog.Handler { return traceHandler{h} }

type traceHandler struct{ slog.Handler }

func (t traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return t.Handler.Handle(ctx, r)
}

func (t traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return traceHandler{t.Handler.WithAttrs(as)}
}

func (t traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{t.Handler.WithGroup(name)}
}
