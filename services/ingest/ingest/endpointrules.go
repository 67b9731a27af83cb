package ingest

// The rules an endpoint's fields must keep (CreateEndpoint, UpdateEndpoint):
// static limits and formats, and the URL's SSRF check.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/hookline/hookline/platform/filter"
	"github.com/hookline/hookline/platform/netguard"
	"github.com/hookline/hookline/services/ingest/apikey"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Defaults and limits of endpoint calls. The limits of the fields
// themselves (lengths, counts, ranges) are the proto's field rules
// (fieldrules.go); maxPageSize is ListEndpointsRequest's and
// SearchDeliveriesRequest's, for the console's own requests.
const (
	defaultPageSize = 100
	maxPageSize     = 1000
	defaultGrace    = 24 * time.Hour
	// maxWriteAttempts bounds how often a change without an etag is
	// re-applied after losing to a concurrent change of the endpoint.
	maxWriteAttempts = 5
)

func invalid(field, format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, "%s: %s", field, fmt.Sprintf(format, args...))
}

// urlRules checks an endpoint's URL, as CreateEndpoint and
// UpdateEndpoint set it and as a transformation returns it: its form,
// --allow-http, and a destination the SSRF guard accepts, the host
// resolved within --dns-timeout. It holds those, the guard and the
// resolver; nothing else.
type urlRules struct {
	// allowHTTP is --allow-http; dnsTimeout is --dns-timeout.
	allowHTTP  bool
	dnsTimeout time.Duration
	guard      *netguard.Policy
	// lookup resolves a host (WithResolver; default net.DefaultResolver).
	lookup func(ctx context.Context, host string) ([]net.IP, error)
}

// validateURL checks an endpoint URL: absolute http(s), a host, no
// credentials, and a destination the SSRF guard accepts. Resolving the
// host is bounded by --dns-timeout; callers hold no lock.
func (ur *urlRules) validateURL(ctx context.Context, raw string) error {
	if raw == "" {
		return invalid("url", "is required")
	}
	// Its length is the proto's rule (fieldrules.go).
	u, err := url.Parse(raw)
	if err != nil {
		return invalid("url", "is not a valid URL: %v", err)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !ur.allowHTTP {
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
	lctx, cancel := context.WithTimeout(ctx, ur.dnsTimeout)
	defer cancel()
	err = ur.guard.For(apikey.TenantFrom(ctx)).CheckHost(u.Hostname(), func(host string) ([]net.IP, error) { return ur.lookup(lctx, host) })
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	case errors.Is(err, context.DeadlineExceeded):
		return status.Errorf(codes.Unavailable, "url: resolving %q took longer than %v; nothing was changed, retry", u.Hostname(), ur.dnsTimeout)
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
func (ur *urlRules) urlNote(ctx context.Context, raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" || net.ParseIP(u.Hostname()) != nil {
		return ""
	}
	lctx, cancel := context.WithTimeout(ctx, ur.dnsTimeout)
	defer cancel()
	ips, err := ur.lookup(lctx, u.Hostname())
	switch {
	case err != nil:
		return fmt.Sprintf("host %q does not resolve now (%v): deliveries fail until it does", u.Hostname(), err)
	case len(ips) == 0:
		return fmt.Sprintf("host %q does not resolve now (no addresses): deliveries fail until it does", u.Hostname())
	}
	return ""
}

// noteURL sends urlNote's note, if any, as the call's warningHeader.
func (ur *urlRules) noteURL(ctx context.Context, raw string) {
	if note := ur.urlNote(ctx, raw); note != "" {
		_ = grpc.SetHeader(ctx, metadata.Pairs(warningHeader, note))
	}
}

// validateEventTypes checks each pattern of an endpoint's event types
// (their count is the proto's rule).
func validateEventTypes(types []string) error {
	for i, t := range types {
		if err := filter.ValidatePattern(t); err != nil {
			return invalid(fmt.Sprintf("event_types[%d]", i), "%v", err)
		}
	}
	return nil
}
