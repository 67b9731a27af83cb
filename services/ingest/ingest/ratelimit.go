package ingest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/services/ingest/apikey"
	"golang.org/x/time/rate"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// publishLimits is a token bucket per tenant for PublishEvent
// (--publish-rate, --publish-burst). Tenants are those of the API keys,
// so the map stays as small as the key set. Safe for concurrent use.
type publishLimits struct {
	rate  rate.Limit
	burst int
	now   func() time.Time

	mu      sync.Mutex
	tenants map[string]*rate.Limiter
}

// newPublishLimits returns the limits of perSecond calls per tenant with
// bursts of burst; perSecond 0 means no limit.
func newPublishLimits(perSecond float64, burst int, now func() time.Time) *publishLimits {
	r := rate.Limit(perSecond)
	if perSecond == 0 {
		r = rate.Inf
	}
	return &publishLimits{rate: r, burst: burst, now: now, tenants: map[string]*rate.Limiter{}}
}

// take spends one of tenant's tokens; when none is left it spends
// nothing and returns how long until one is.
func (l *publishLimits) take(tenant string) (wait time.Duration, ok bool) {
	l.mu.Lock()
	lim, found := l.tenants[tenant]
	if !found {
		lim = rate.NewLimiter(l.rate, l.burst)
		l.tenants[tenant] = lim
	}
	l.mu.Unlock()
	now := l.now()
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d, false
	}
	return 0, true
}

// unaryInterceptor refuses a PublishEvent beyond its tenant's rate with
// RESOURCE_EXHAUSTED and a google.rpc.RetryInfo saying when to retry. It
// runs after authentication, so the tenant is known.
func (l *publishLimits) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if info.FullMethod != hooklinev1.EventService_PublishEvent_FullMethodName || l.rate == rate.Inf {
		return handler(ctx, req)
	}
	wait, ok := l.take(apikey.TenantFrom(ctx))
	if ok {
		return handler(ctx, req)
	}
	// Whole milliseconds, rounded up: a client that waits exactly this
	// finds a token.
	wait = time.Duration(math.Ceil(float64(wait)/float64(time.Millisecond))) * time.Millisecond
	return nil, retryLater(wait, fmt.Sprintf("tenant is over its PublishEvent rate (%v per second, bursts of %d); retry in %v", float64(l.rate), l.burst, wait))
}

// retryLater is a RESOURCE_EXHAUSTED status saying msg, with a
// google.rpc.RetryInfo detail asking the client to retry after delay.
func retryLater(delay time.Duration, msg string) error {
	st := status.New(codes.ResourceExhausted, msg)
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(delay)}); err == nil {
		st = d
	}
	return st.Err()
}

// checkLimits validates the limits and quotas of cfg.
func (cfg Config) checkLimits() error {
	switch {
	case math.IsNaN(cfg.PublishRate) || math.IsInf(cfg.PublishRate, 0) || cfg.PublishRate < 0:
		return errors.New("--publish-rate must be a number of calls per second, 0 for no limit")
	case cfg.PublishRate > 0 && cfg.PublishBurst < 1:
		return errors.New("--publish-burst must be at least 1")
	case cfg.MaxFanoutBytes < int64(cfg.MaxPayloadBytes):
		return fmt.Errorf("--max-fanout-bytes (%d) must be at least --max-payload-bytes (%d)", cfg.MaxFanoutBytes, cfg.MaxPayloadBytes)
	case cfg.MaxConcurrentStreams < 1:
		return errors.New("--grpc-max-concurrent-streams must be at least 1")
	case cfg.KeepaliveMinTime <= 0 || cfg.KeepaliveTime <= 0 || cfg.KeepaliveTimeout <= 0:
		return errors.New("--grpc-keepalive-min-time, --grpc-keepalive-time and --grpc-keepalive-timeout must be positive")
	case cfg.RecoverMaxWindow <= 0 || cfg.RecoverMaxDeliveries < 1:
		return errors.New("--recover-max-window must be positive and --recover-max-deliveries at least 1")
	}
	return nil
}
