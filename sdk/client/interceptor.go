package client

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/sdk/backoff"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// GiveUpError ends a call whose retry budget ran out: Attempts attempts
// were made and Err is the last one's error. Its gRPC status is Err's, so
// status.Code(err) still names what went wrong.
type GiveUpError struct {
	Attempts int
	// Budget says which budget ran out: "attempts" or "time".
	Budget string
	Err    error
}

func (e *GiveUpError) Error() string {
	return fmt.Sprintf("hookline: gave up after %d attempt(s), %s budget spent: %v", e.Attempts, e.Budget, e.Err)
}

func (e *GiveUpError) Unwrap() error { return e.Err }

// GRPCStatus returns the last attempt's status.
func (e *GiveUpError) GRPCStatus() *status.Status { return status.Convert(e.Err) }

// retries reports whether the SDK retries method: PublishEvent (made safe
// by its idempotency key) and the reads (Get…, List…), whose repeat
// changes nothing. Creates, updates, rotations, resends and test sends
// are tried once: without a key a retry could do them twice.
func retries(method string) bool {
	if method == hooklinev1.EventService_PublishEvent_FullMethodName {
		return true
	}
	svc, name, ok := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	if !ok || !strings.HasPrefix(svc, "hookline.v1.") {
		return false
	}
	return strings.HasPrefix(name, "Get") || strings.HasPrefix(name, "List")
}

// retrier is the retry loop behind UnaryInterceptor.
type retrier struct {
	policy RetryPolicy
	log    *slog.Logger
	now    func() time.Time
	sleep  func(context.Context, time.Duration) error
	rand   backoff.Rand
	newKey func() string
}

// UnaryInterceptor returns the SDK's retry discipline as a gRPC client
// interceptor, for callers that build their own connection (Dial installs
// it). It is safe for concurrent use.
func UnaryInterceptor(opts ...Option) grpc.UnaryClientInterceptor {
	return newSettings(opts).loop().intercept
}

func (r *retrier) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if !retries(method) {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	// One key for the logical publish, made before the first try and
	// sent unchanged on every retry, so the server writes it once.
	var key string
	if p, ok := req.(*hooklinev1.PublishEventRequest); ok {
		key = p.GetIdempotencyKey()
		if key == "" {
			key = r.newKey()
			p = proto.CloneOf(p)
			p.IdempotencyKey = key
			req = p
		}
	}
	pol := r.policy.backoff()
	start := r.now()
	for attempt := 1; ; attempt++ {
		err := r.try(ctx, method, req, reply, cc, invoker, opts)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || !Retryable(err) {
			return err
		}
		if attempt >= r.policy.MaxAttempts {
			return &GiveUpError{Attempts: attempt, Budget: "attempts", Err: err}
		}
		delay, fromServer := ServerDelay(err)
		if !fromServer {
			delay = pol.Delay(uint32(attempt), r.rand)
		}
		if r.now().Sub(start)+delay >= r.policy.MaxElapsed {
			return &GiveUpError{Attempts: attempt, Budget: "time", Err: err}
		}
		r.log.WarnContext(ctx, "hookline: retrying",
			"method", method, "attempt", attempt+1, "failed_attempt", attempt,
			"code", status.Code(err).String(), "delay", delay, "server_delay", fromServer,
			"idempotency_key", key, "err", status.Convert(err).Message())
		if err := r.sleep(ctx, delay); err != nil {
			return status.FromContextError(err).Err()
		}
	}
}

// try makes one attempt, bounded by the per-attempt timeout.
func (r *retrier) try(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts []grpc.CallOption) error {
	if r.policy.PerAttempt > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.policy.PerAttempt)
		defer cancel()
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}
