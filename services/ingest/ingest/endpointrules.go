package ingest

// The rules an endpoint's fields must keep (CreateEndpoint, UpdateEndpoint):
// static limits and formats, and the URL's SSRF check.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"strconv"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/endpoints"
	"github.com/hookline/hookline/platform/filter"
	"github.com/hookline/hookline/services/ingest/apikey"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Limits on endpoint fields.
const (
	maxURLLen         = 2048
	maxDescriptionLen = 1024
	maxEventTypes     = 256
	maxMetadata       = 64
	maxTimeout        = 60 * time.Second
	maxAttemptsLimit  = 100
	maxLadderRungs    = 64
	maxDelay          = 7 * 24 * time.Hour
	defaultPageSize   = 100
	maxPageSize       = 1000
	defaultGrace      = 24 * time.Hour
	maxGrace          = 7 * 24 * time.Hour
	// maxWriteAttempts bounds how often a change without an etag is
	// re-applied after losing to a concurrent change of the endpoint.
	maxWriteAttempts = 5
)

func invalid(field, format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, "%s: %s", field, fmt.Sprintf(format, args...))
}

// validateURL checks an endpoint URL: absolute http(s), a host, no
// credentials, and a destination the SSRF guard accepts. Resolving the
// host is bounded by --dns-timeout; callers hold no lock.
func (s *Service) validateURL(ctx context.Context, raw string) error {
	if raw == "" {
		return invalid("url", "is required")
	}
	if len(raw) > maxURLLen {
		return invalid("url", "is %d bytes, the limit is %d", len(raw), maxURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return invalid("url", "is not a valid URL: %v", err)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !s.cfg.AllowHTTP {
			return invalid("url", "must use https (this deployment does not accept http endpoints)")
		}
	default:
		return invalid("url", "must be an absolute https:// URL, got scheme %q", u.Scheme)
	}
	if u.Hostname() == "" {
		return invalid("url", "has no host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return invalid("url", "has port %s; a port is between 1 and 65535", p)
		}
	}
	if u.User != nil {
		return invalid("url", "must not contain credentials; authenticate receivers with the webhook signature")
	}
	if u.Fragment != "" {
		return invalid("url", "must not contain a fragment")
	}
	lctx, cancel := context.WithTimeout(ctx, s.cfg.DNSTimeout)
	defer cancel()
	err = s.guard.For(apikey.TenantFrom(ctx)).CheckHost(u.Hostname(), func(host string) ([]net.IP, error) { return s.lookup(lctx, host) })
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	case errors.Is(err, context.DeadlineExceeded):
		return status.Errorf(codes.Unavailable, "url: resolving %q took longer than %v; nothing was changed, retry", u.Hostname(), s.cfg.DNSTimeout)
	}
	return status.Errorf(codes.InvalidArgument, "url: destination not allowed: %v", err)
}

// warningHeader is the response header (gRPC metadata; over HTTP
// Grpc-Metadata-Hookline-Warning) that carries urlNote's note on
// CreateEndpoint and UpdateEndpoint. The CLI prints it.
const warningHeader = "hookline-warning"

// urlNote says what is wrong with an accepted endpoint URL that may
// still come right: a host name that does not resolve now (where the
// destination guard did not need it to: dev mode, or every destination
// allowed). Deliveries fail until it resolves; nothing refuses it,
// since DNS may be fixed. "" when there is nothing to say. Resolving
// is bounded by --dns-timeout.
func (s *Service) urlNote(ctx context.Context, raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" || net.ParseIP(u.Hostname()) != nil {
		return ""
	}
	lctx, cancel := context.WithTimeout(ctx, s.cfg.DNSTimeout)
	defer cancel()
	ips, err := s.lookup(lctx, u.Hostname())
	switch {
	case err != nil:
		return fmt.Sprintf("host %q does not resolve now (%v): deliveries fail until it does", u.Hostname(), err)
	case len(ips) == 0:
		return fmt.Sprintf("host %q does not resolve now (no addresses): deliveries fail until it does", u.Hostname())
	}
	return ""
}

// noteURL sends urlNote's note, if any, as the call's warningHeader.
func (s *Service) noteURL(ctx context.Context, raw string) {
	if note := s.urlNote(ctx, raw); note != "" {
		_ = grpc.SetHeader(ctx, metadata.Pairs(warningHeader, note))
	}
}

func validateEventTypes(types []string) error {
	if len(types) > maxEventTypes {
		return invalid("event_types", "has %d entries, the limit is %d", len(types), maxEventTypes)
	}
	for i, t := range types {
		if err := filter.ValidatePattern(t); err != nil {
			return invalid(fmt.Sprintf("event_types[%d]", i), "%v", err)
		}
	}
	return nil
}

func validateTimeout(d *durationpb.Duration) error {
	if d == nil {
		return nil
	}
	if err := d.CheckValid(); err != nil || d.AsDuration() < time.Second || d.AsDuration() > maxTimeout {
		return invalid("timeout", "must be between 1s and %v", maxTimeout)
	}
	return nil
}

func validateRetryPolicy(p *hooklinev1.RetryPolicy) error {
	if p == nil {
		return nil
	}
	if p.GetMaxAttempts() > maxAttemptsLimit {
		return invalid("retry_policy.max_attempts", "is %d, the limit is %d", p.GetMaxAttempts(), maxAttemptsLimit)
	}
	if a := p.GetMaxAge(); a != nil && (a.CheckValid() != nil || a.AsDuration() <= 0 || a.AsDuration() > 30*24*time.Hour) {
		return invalid("retry_policy.max_age", "must be positive and at most 30 days")
	}
	delayOK := func(d *durationpb.Duration) bool {
		return d != nil && d.CheckValid() == nil && d.AsDuration() >= 0 && d.AsDuration() <= maxDelay
	}
	if e := p.GetExponential(); e != nil {
		if e.GetInitial() != nil && !delayOK(e.GetInitial()) || e.GetMax() != nil && !delayOK(e.GetMax()) {
			return invalid("retry_policy.exponential", "delays must be between 0 and %v", maxDelay)
		}
		if f := e.GetFactor(); f != 0 && (math.IsNaN(f) || f < 1 || f > 10) {
			return invalid("retry_policy.exponential.factor", "is %v; it must be between 1 and 10 (0: the default)", f)
		}
	}
	if l := p.GetLadder(); l != nil {
		if n := len(l.GetDelays()); n == 0 || n > maxLadderRungs {
			return invalid("retry_policy.ladder.delays", "must have 1 to %d delays", maxLadderRungs)
		}
		zero := true
		for i, d := range l.GetDelays() {
			if !delayOK(d) {
				return invalid(fmt.Sprintf("retry_policy.ladder.delays[%d]", i), "must be between 0 and %v", maxDelay)
			}
			zero = zero && d.AsDuration() == 0
		}
		if zero {
			return invalid("retry_policy.ladder.delays", "are all 0, so every retry would follow its failure at once; give at least one positive delay")
		}
	}
	return nil
}

// validateMaxInFlight refuses more attempts in flight than the
// dispatcher honours.
func validateMaxInFlight(n uint32) error {
	if n > endpoints.MaxInFlightCeiling {
		return invalid("max_in_flight", "is %d, the limit is %d (0: the default)", n, endpoints.MaxInFlightCeiling)
	}
	return nil
}

// validateRate refuses a rate that is not a finite number between 0 (the
// default) and the dispatcher's ceiling, or positive below the floor.
func validateRate(r float64) error {
	if math.IsNaN(r) || math.IsInf(r, 0) || r < 0 || r > endpoints.RateLimitCeiling {
		return invalid("rate_limit_per_second", "is %v; it must be a number from 0 (the default) to %d attempts per second", r, endpoints.RateLimitCeiling)
	}
	if r > 0 && r < endpoints.RateLimitFloor {
		return invalid("rate_limit_per_second", "is %v; a positive rate must be at least %v attempts per second (one every %v); to stop deliveries, pause the endpoint", r, endpoints.RateLimitFloor, time.Duration(float64(time.Second)/endpoints.RateLimitFloor))
	}
	return nil
}

func validateMetadata(md map[string]string) error {
	if len(md) > maxMetadata {
		return invalid("metadata", "has %d entries, the limit is %d", len(md), maxMetadata)
	}
	for k, v := range md {
		if k == "" || len(k) > 128 || len(v) > 1024 {
			return invalid("metadata", "keys must be 1-128 bytes and values at most 1024 bytes")
		}
	}
	return nil
}
