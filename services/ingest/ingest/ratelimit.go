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

// A rateClass is a set of RPCs that share one token bucket per tenant.
type rateClass struct {
	name  string // what the refusal names: the flags and the calls
	rate  rate.Limit
	burst int

	mu      sync.Mutex
	tenants map[string]*rate.Limiter
}

// writeLimits are the per-tenant rates of every RPC that writes to a
// topic: PublishEvent (--publish-rate, --publish-burst); the calls that
// make Hookline send on command, SendTestEvent, ResendDelivery,
// RecoverEndpoint, ResendLaneHead and SkipLaneHead, together
// (--replay-rate, --replay-burst); the endpoint writes (--endpoint-write-
// rate, --endpoint-write-burst). Tenants are those of the API keys, so
// each map stays as small as the key set. Safe for concurrent use.
type writeLimits struct {
	now     func() time.Time
	classes map[string]*rateClass // by full method name
}

// newWriteLimits returns the limits cfg sets; a rate of 0 is no limit.
func newWriteLimits(cfg Config, now func() time.Time) *writeLimits {
	class := func(name string, perSecond float64, burst int) *rateClass {
		r := rate.Limit(perSecond)
		if perSecond == 0 {
			r = rate.Inf
		}
		return &rateClass{name: name, rate: r, burst: burst, tenants: map[string]*rate.Limiter{}}
	}
	publish := class("PublishEvent (--publish-rate, --publish-burst)", cfg.PublishRate, cfg.PublishBurst)
	replay := class("SendTestEvent, ResendDelivery, RecoverEndpoint and the lane commands together (--replay-rate, --replay-burst)", cfg.ReplayRate, cfg.ReplayBurst)
	endpoint := class("endpoint writes (--endpoint-write-rate, --endpoint-write-burst)", cfg.EndpointWriteRate, cfg.EndpointWriteBurst)
	return &writeLimits{now: now, classes: map[string]*rateClass{
		hooklinev1.EventService_PublishEvent_FullMethodName:            publish,
		hooklinev1.DeliveryService_SendTestEvent_FullMethodName:        replay,
		hooklinev1.DeliveryService_ResendDelivery_FullMethodName:       replay,
		hooklinev1.DeliveryService_RecoverEndpoint_FullMethodName:      replay,
		hooklinev1.LaneService_ResendLaneHead_FullMethodName:           replay,
		hooklinev1.LaneService_SkipLaneHead_FullMethodName:             replay,
		hooklinev1.EndpointService_CreateEndpoint_FullMethodName:       endpoint,
		hooklinev1.EndpointService_UpdateEndpoint_FullMethodName:       endpoint,
		hooklinev1.EndpointService_DeleteEndpoint_FullMethodName:       endpoint,
		hooklinev1.EndpointService_PauseEndpoint_FullMethodName:        endpoint,
		hooklinev1.EndpointService_ResumeEndpoint_FullMethodName:       endpoint,
		hooklinev1.EndpointService_RotateEndpointSecret_FullMethodName: endpoint,
	}}
}

// take spends one of tenant's tokens of class c at now; when none is
// left it spends nothing and returns how long until one is.
func (c *rateClass) take(tenant string, now time.Time) (wait time.Duration, ok bool) {
	c.mu.Lock()
	lim, found := c.tenants[tenant]
	if !found {
		lim = rate.NewLimiter(c.rate, c.burst)
		c.tenants[tenant] = lim
	}
	c.mu.Unlock()
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d, false
	}
	return 0, true
}

// check returns nil when the call may go on, else RESOURCE_EXHAUSTED
// with a google.rpc.RetryInfo saying when to retry. It runs after
// authentication, so the tenant is known.
func (l *writeLimits) check(ctx context.Context, method string) error {
	c := l.classes[method]
	if c == nil || c.rate == rate.Inf {
		return nil
	}
	wait, ok := c.take(apikey.TenantFrom(ctx), l.now())
	if ok {
		return nil
	}
	// Whole milliseconds, rounded up: a client that waits exactly this
	// finds a token.
	wait = time.Duration(math.Ceil(float64(wait)/float64(time.Millisecond))) * time.Millisecond
	return retryLater(wait, fmt.Sprintf("tenant is over its rate of %s: %v per second, bursts of %d; retry in %v", c.name, float64(c.rate), c.burst, wait))
}

// unaryInterceptor applies the limits to unary calls.
func (l *writeLimits) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := l.check(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// streamInterceptor applies the limits to streaming calls
// (RecoverEndpoint).
func (l *writeLimits) streamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := l.check(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return handler(srv, ss)
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
	case math.IsNaN(cfg.ReplayRate) || math.IsInf(cfg.ReplayRate, 0) || cfg.ReplayRate < 0:
		return errors.New("--replay-rate must be a number of calls per second, 0 for no limit")
	case cfg.ReplayRate > 0 && cfg.ReplayBurst < 1:
		return errors.New("--replay-burst must be at least 1")
	case math.IsNaN(cfg.EndpointWriteRate) || math.IsInf(cfg.EndpointWriteRate, 0) || cfg.EndpointWriteRate < 0:
		return errors.New("--endpoint-write-rate must be a number of calls per second, 0 for no limit")
	case cfg.EndpointWriteRate > 0 && cfg.EndpointWriteBurst < 1:
		return errors.New("--endpoint-write-burst must be at least 1")
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
