package telemetry

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"go.opentelemetry.io/otel/trace"
)

// osGetenv is the one read of OTEL_* variables outside platform/config:
// the OpenTelemetry SDK defines them and reads them itself.
var osGetenv = os.Getenv

// NewLogger returns a JSON logger writing to w at level ("debug", "info",
// "warn" or "error") whose lines carry trace_id and span_id whenever the
// context passed to the logging call holds a span.
func NewLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: use debug, info, warn or error", level)
	}
	return slog.New(TraceHandler(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l}))), nil
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
