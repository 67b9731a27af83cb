package ingest

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A finished call's line is written for the codes logged at the
// logger's level, with the call's method, code, error and real timing;
// a successful call gets one only with debug on.
func TestCallLogWritesTheLinesItsLevelAllowsWithTheirTiming(t *testing.T) {
	info := &grpc.UnaryServerInfo{FullMethod: "/hookline.v1.EventService/PublishEvent"}
	tests := []struct {
		name   string
		level  slog.Level
		err    error
		logged bool
	}{
		{"ok at info", slog.LevelInfo, nil, false},
		{"pushed back at info", slog.LevelInfo, status.Error(codes.ResourceExhausted, "busy"), false},
		{"unavailable at info", slog.LevelInfo, status.Error(codes.Unavailable, "kafka down"), true},
		{"invalid at warn", slog.LevelWarn, status.Error(codes.InvalidArgument, "bad"), false},
		{"ok at debug", slog.LevelDebug, nil, true},
		{"unavailable at debug", slog.LevelDebug, status.Error(codes.Unavailable, "kafka down"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: tt.level}))
			calls := 0
			handler := func(context.Context, any) (any, error) {
				calls++
				time.Sleep(20 * time.Millisecond) // the call's own duration, which the line must show
				return "resp", tt.err
			}
			resp, err := unaryCallLog(log)(t.Context(), "req", info, handler)
			if calls != 1 || resp != "resp" || !errors.Is(err, tt.err) {
				t.Fatalf("handler ran %d times, answered %v, %v; want once, resp, %v", calls, resp, err, tt.err)
			}
			line := out.String()
			if !tt.logged {
				if line != "" {
					t.Fatalf("logged %q, want nothing", line)
				}
				return
			}
			for _, want := range []string{"finished call", "grpc.method=PublishEvent", "grpc.code=" + status.Code(tt.err).String(), "grpc.start_time="} {
				if !strings.Contains(line, want) {
					t.Fatalf("line %q lacks %q", line, want)
				}
			}
			if strings.Count(line, "grpc.start_time=") != 1 || strings.Count(line, "grpc.time_ms=") != 1 || strings.Contains(line, "grpc.time_ms=0.") || strings.Contains(line, "grpc.time_ms=1.") {
				t.Fatalf("line %q: want one start time and one grpc.time_ms of the call's 20 ms or more", line)
			}
		})
	}
}
