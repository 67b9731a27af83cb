package client

import (
	"context"
	"strings"
	"time"

	"github.com/hookline/hookline/sdk/backoff"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// RetryPolicy bounds the retries of one logical call (SPEC R-CLIENT): a
// call ends at the first of MaxAttempts attempts or MaxElapsed since the
// first attempt began, whichever comes first (the double budget).
type RetryPolicy struct {
	// MaxAttempts counts the first attempt too; 1 disables retries.
	// Default 5.
	MaxAttempts int
	// MaxElapsed is the total time budget: no retry starts (and no wait
	// is begun) that would end after it. Default 30 s.
	MaxElapsed time.Duration
	// PerAttempt bounds each attempt; an attempt cut by it ends in
	// DEADLINE_EXCEEDED, which is retried. Default 10 s; 0 keeps the
	// default, a negative value means no per-attempt bound.
	PerAttempt time.Duration
	// Initial and Max shape the full-jitter backoff: the wait after
	// failed attempt n is rand(0, min(Max, Initial·2^(n-1))). Defaults
	// 100 ms and 5 s.
	Initial time.Duration
	Max     time.Duration
}

// DefaultRetryPolicy is the policy a Client uses unless WithRetryPolicy
// says otherwise.
var DefaultRetryPolicy = RetryPolicy{MaxAttempts: 5, MaxElapsed: 30 * time.Second, PerAttempt: 10 * time.Second, Initial: 100 * time.Millisecond, Max: 5 * time.Second}

// withDefaults fills the zero fields of p from DefaultRetryPolicy.
func (p RetryPolicy) withDefaults() RetryPolicy {
	d := DefaultRetryPolicy
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = d.MaxAttempts
	}
	if p.MaxElapsed <= 0 {
		p.MaxElapsed = d.MaxElapsed
	}
	if p.PerAttempt == 0 {
		p.PerAttempt = d.PerAttempt
	}
	if p.Initial <= 0 {
		p.Initial = d.Initial
	}
	if p.Max <= 0 {
		p.Max = d.Max
	}
	return p
}

// backoff is the full-jitter schedule of p, computed by platform/backoff.
func (p RetryPolicy) backoff() backoff.Policy {
	return backoff.Policy{Initial: p.Initial, Factor: 2, Max: p.Max, Jitter: backoff.JitterFull}
}

// Retryable reports whether a failed call may be tried again: only the
// transient codes UNAVAILABLE, DEADLINE_EXCEEDED and RESOURCE_EXHAUSTED.
// Every other code (INVALID_ARGUMENT, UNAUTHENTICATED, NOT_FOUND, …)
// would fail the same way again, and so would a RESOURCE_EXHAUSTED that
// is gRPC's transport refusing a message larger than its maximum (either
// side's): the same message is as large next time.
func Retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	case codes.ResourceExhausted:
		return !tooLarge(err)
	default:
		return false
	}
}

// tooLarge reports whether err is grpc-go's refusal of an oversize
// message ("grpc: received message larger than max (N vs. M)", "grpc:
// trying to send message larger than max …"), which carries no
// RetryInfo; ingest's push-back does.
func tooLarge(err error) bool {
	if _, ok := ServerDelay(err); ok {
		return false
	}
	return strings.Contains(status.Convert(err).Message(), "message larger than max")
}

// ServerDelay returns the wait the server asked for in a
// google.rpc.RetryInfo detail of err's status, if it sent one.
func ServerDelay(err error) (time.Duration, bool) {
	s, ok := status.FromError(err)
	if !ok {
		return 0, false
	}
	for _, d := range s.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			if d := ri.GetRetryDelay().AsDuration(); d >= 0 {
				return d, true
			}
		}
	}
	return 0, false
}

// sleepCtx waits d or until ctx ends; it is the default Sleeper.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
