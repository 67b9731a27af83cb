package ingest

import (
	"context"
	"log/slog"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// unaryCallLog logs one line per finished call whose level log has on
// (callLevel): the go-grpc-middleware logging interceptor, entered only
// for those calls (quietCalls).
func unaryCallLog(log *slog.Logger) grpc.UnaryServerInterceptor {
	return quietCalls(log, logging.UnaryServerInterceptor(callLogger(log),
		logging.WithLogOnEvents(logging.FinishCall), logging.WithLevels(callLevel), logging.WithFieldsFromContext(timingFields)))
}

// streamCallLog is unaryCallLog for streams (few, long: every one goes
// through the interceptor).
func streamCallLog(log *slog.Logger) grpc.StreamServerInterceptor {
	return logging.StreamServerInterceptor(callLogger(log), logging.WithLogOnEvents(logging.FinishCall), logging.WithLevels(callLevel))
}

func callLogger(log *slog.Logger) logging.Logger {
	return logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		log.Log(ctx, slog.Level(lvl), msg, fields...)
	})
}

// callLevel is the level of a finished call's log line: a successful or
// pushed-back call at debug only (at thousands of publishes a second a
// line each was a cost every caller paid, and a push-back under
// --max-in-flight-bytes comes by the thousand exactly when the process is
// busiest; rpc.server.call.duration counts them by status), every other
// code at go-grpc-middleware's default.
func callLevel(c codes.Code) logging.Level {
	if c == codes.OK || c == codes.ResourceExhausted {
		return logging.LevelDebug
	}
	return logging.DefaultServerCodeToLevel(c)
}

// callTiming is when a call began and how long it took, for the log
// line of a call that is logged after it finished (quietCalls).
type callTiming struct {
	start time.Time
	took  time.Duration
}

type callTimingKey struct{}

// timingFields gives a replayed call's line its real start and duration
// (logging.WithFieldsFromContext: these win over the interceptor's own).
func timingFields(ctx context.Context) logging.Fields {
	t, ok := ctx.Value(callTimingKey{}).(callTiming)
	if !ok {
		return nil
	}
	return append(logging.Fields{"grpc.start_time", t.start.Format(time.RFC3339)}, logging.DurationToTimeMillisFields(t.took)...)
}

// quietCalls runs the logging interceptor (logged) only for the calls
// whose line log would write. go-grpc-middleware builds every field of
// a call's line (method, peer, start time, deadline, context fields)
// before the call and again after it, whatever the level: about 4% of
// ingest's CPU and 7% of its allocated bytes at thousands of publishes a
// second, for lines dropped at the default level. With debug on, every
// call goes through logged as before; otherwise the handler runs alone,
// and a call that ends with a code logged at an enabled level is passed
// through logged afterwards with its outcome and real timing, so the
// line is the same one, from the same place.
func quietCalls(log *slog.Logger, logged grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if log.Enabled(ctx, slog.LevelDebug) {
			return logged(ctx, req, info, handler)
		}
		start := time.Now()
		resp, err := handler(ctx, req)
		if !log.Enabled(ctx, slog.Level(callLevel(status.Code(err)))) {
			return resp, err
		}
		ctx = context.WithValue(ctx, callTimingKey{}, callTiming{start: start, took: time.Since(start)})
		return logged(ctx, req, info, func(context.Context, any) (any, error) { return resp, err })
	}
}
