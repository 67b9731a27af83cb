package ingest

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
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/sdk/ids"
	"github.com/hookline/hookline/services/ingest/apikey"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
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

func (h *endpointService) CreateEndpoint(ctx context.Context, req *hooklinev1.CreateEndpointRequest) (*hooklinev1.CreateEndpointResponse, error) {
	s := h.s
	tenant := apikey.TenantFrom(ctx)
	if err := s.validateURL(ctx, req.GetUrl()); err != nil {
		return nil, err
	}
	s.noteURL(ctx, req.GetUrl())
	if len(req.GetDescription()) > maxDescriptionLen {
		return nil, invalid("description", "is %d bytes, the limit is %d", len(req.GetDescription()), maxDescriptionLen)
	}
	for _, err := range []error{
		validateEventTypes(req.GetEventTypes()),
		validateTimeout(req.GetTimeout()),
		validateRetryPolicy(req.GetRetryPolicy()),
		validateMetadata(req.GetMetadata()),
		validateMaxInFlight(req.GetMaxInFlight()),
		validateRate(req.GetRateLimitPerSecond()),
		validateOrdering(req.GetOrdering()),
		validateHeadFailure(req.GetOnHeadFailure()),
		s.validateFilter(req.GetFilter()),
		s.validateTransformation(req.GetTransformation()),
	} {
		if err != nil {
			return nil, err
		}
	}
	scheme, err := givenSecret("secret", req.GetSecret(), req.GetSignatureScheme())
	if err != nil {
		return nil, err
	}
	secret := newSecret(req.GetSecret(), scheme)

	// Creates of one tenant are serialised (in this process) for its
	// endpoint limit; nothing else waits for them.
	unlock, err := s.locks.lock(ctx, "tenant:"+tenant)
	if err != nil {
		return nil, status.FromContextError(err).Err()
	}
	defer unlock()
	if n := s.store.Count(tenant); n >= s.cfg.MaxEndpoints {
		return nil, status.Errorf(codes.ResourceExhausted, "tenant has %d endpoints, the limit is %d; delete unused endpoints", n, s.cfg.MaxEndpoints)
	}
	now := timestamppb.New(s.now())
	rec := &hooklinev1.EndpointRecord{
		Endpoint: &hooklinev1.Endpoint{
			Id:                 ids.New(ids.Endpoint, s.now()),
			TenantId:           tenant,
			Url:                req.GetUrl(),
			Description:        req.GetDescription(),
			EventTypes:         req.GetEventTypes(),
			Status:             hooklinev1.EndpointStatus_ENDPOINT_STATUS_ACTIVE,
			Timeout:            req.GetTimeout(),
			MaxInFlight:        req.GetMaxInFlight(),
			RateLimitPerSecond: req.GetRateLimitPerSecond(),
			RetryPolicy:        req.GetRetryPolicy(),
			CreatedAt:          now,
			UpdatedAt:          now,
			Metadata:           req.GetMetadata(),
			OutageModeDisabled: req.GetOutageModeDisabled(),
			Ordering:           req.GetOrdering(),
			OnHeadFailure:      req.GetOnHeadFailure(),
			Filter:             req.GetFilter(),
			Transformation:     req.GetTransformation(),
		},
		Version: 1,
	}
	es, err := s.seal(rec, secret, now.AsTime())
	if err != nil {
		return nil, err
	}
	rec.Secrets = []*hooklinev1.EndpointSecret{es}
	rec.Endpoint.SignatureScheme = schemeOf(es)
	if err := s.writeEndpoint(ctx, rec.GetEndpoint().GetId(), rec); err != nil {
		if errors.Is(err, endpoints.ErrLost) { // a fresh id cannot lose
			return nil, status.Errorf(codes.Internal, "endpoint id %s taken", rec.GetEndpoint().GetId())
		}
		return nil, err
	}
	shownSecret, publicKey := shown(es, secret)
	return &hooklinev1.CreateEndpointResponse{Endpoint: withEtag(rec), Secret: shownSecret, PublicKey: publicKey}, nil
}

// writeEndpoint writes rec (nil: a tombstone) as endpoint id's next
// record and waits until this replica's view has read it, so the caller
// reads its own write. The write is conditional, decided in log order
// (platform/endpoints): endpoints.ErrLost means a concurrent change came
// first and rec was ignored everywhere. Any other error is a gRPC status.
func (s *Service) writeEndpoint(ctx context.Context, id string, rec *hooklinev1.EndpointRecord) error {
	r := &kgo.Record{Topic: s.topics.Endpoints, Key: []byte(id)}
	if rec != nil {
		var err error
		if r, err = hkafka.Record(s.topics.Endpoints, id, rec); err != nil {
			return status.Errorf(codes.Internal, "encode endpoint: %v", err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, s.cfg.PublishTimeout)
	defer cancel()
	err := s.store.Write(wctx, r, func(ctx context.Context, r *kgo.Record) error { return s.produce(ctx, r) })
	switch {
	case err == nil, errors.Is(err, endpoints.ErrLost):
		return err
	case errors.Is(err, endpoints.ErrUnconfirmed),
		errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		// Written or perhaps still being written, not read back in time:
		// it may or may not apply.
		return status.Errorf(codes.Unavailable, "endpoint change not confirmed within %v (%v); it may still apply: read the endpoint before retrying", s.cfg.PublishTimeout, err)
	}
	return kafkaStatus(ctx, "endpoint not saved", err)
}

// Etag returns the etag of an endpoint record: it names the record's
// version, which every change bumps. Safe for concurrent use.
func Etag(rec *hooklinev1.EndpointRecord) string {
	return "v" + strconv.FormatUint(rec.GetVersion(), 10)
}

// withEtag returns a copy of rec's endpoint with its etag, for answers.
func withEtag(rec *hooklinev1.EndpointRecord) *hooklinev1.Endpoint {
	ep := proto.Clone(rec.GetEndpoint()).(*hooklinev1.Endpoint)
	ep.Etag = Etag(rec)
	return ep
}

func (s *Service) produce(ctx context.Context, rs ...*kgo.Record) error {
	pctx, cancel := context.WithTimeout(ctx, s.cfg.PublishTimeout)
	defer cancel()
	return hkafka.ProduceAcked(pctx, s.kafka, rs...)
}

// owned returns the caller's endpoint id, or NotFound: another tenant's
// endpoint is indistinguishable from a missing one.
func (s *Service) owned(ctx context.Context, id string) (*hooklinev1.EndpointRecord, error) {
	if id == "" {
		return nil, invalid("id", "is required")
	}
	rec := s.store.Get(id)
	if rec == nil && ids.Valid(ids.Endpoint, id) {
		// Perhaps written a moment ago through another replica.
		if err := s.store.Sync(ctx); err != nil {
			return nil, kafkaStatus(ctx, "endpoint lookup", err)
		}
		rec = s.store.Get(id)
	}
	if rec == nil || rec.GetEndpoint().GetTenantId() != apikey.TenantFrom(ctx) {
		return nil, status.Errorf(codes.NotFound, "endpoint %q not found", id)
	}
	return rec, nil
}

// readBarrier makes a read see every endpoint change committed before the
// call began, through any replica (the rounds are shared with publishes).
func (s *Service) readBarrier(ctx context.Context) error {
	if err := s.store.Barrier(ctx); err != nil {
		return kafkaStatus(ctx, "endpoints not read", err)
	}
	return nil
}

func (h *endpointService) GetEndpoint(ctx context.Context, req *hooklinev1.GetEndpointRequest) (*hooklinev1.GetEndpointResponse, error) {
	s := h.s
	if err := s.readBarrier(ctx); err != nil {
		return nil, err
	}
	rec, err := s.owned(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	resp := &hooklinev1.GetEndpointResponse{Endpoint: withEtag(rec), PublicKeys: publicKeys(rec, s.now())}
	if cur := rec.GetSecrets(); len(cur) > 0 {
		secret := ""
		// A signing secret lets its holder forge deliveries: only admin
		// keys read it. A V1A private key is never answered; its public
		// key is public.
		if cur[0].GetPublicKey() == "" && apikey.PrincipalFrom(ctx).Scope == apikey.ScopeAdmin {
			if secret, err = s.open(rec, cur[0]); err != nil {
				return nil, err
			}
		}
		resp.Secret, resp.PublicKey = shown(cur[0], secret)
	}
	return resp, nil
}

func (h *endpointService) ListEndpoints(ctx context.Context, req *hooklinev1.ListEndpointsRequest) (*hooklinev1.ListEndpointsResponse, error) {
	s := h.s
	size := int(req.GetPageSize())
	switch {
	case size == 0:
		size = defaultPageSize
	case size > maxPageSize:
		return nil, invalid("page_size", "is %d, the limit is %d", size, maxPageSize)
	}
	if err := s.readBarrier(ctx); err != nil {
		return nil, err
	}
	resp := &hooklinev1.ListEndpointsResponse{}
	for _, rec := range s.store.List(apikey.TenantFrom(ctx)) {
		if rec.GetEndpoint().GetId() <= req.GetPageToken() {
			continue
		}
		if len(resp.Endpoints) == size {
			resp.NextPageToken = resp.Endpoints[size-1].GetId()
			break
		}
		resp.Endpoints = append(resp.Endpoints, withEtag(rec))
	}
	return resp, nil
}

// change applies fn to a copy of the caller's endpoint id and writes it
// as the next version. The write is conditional (decided in log order
// against every other writer, in any process): if a concurrent change
// came first, change re-reads the endpoint and applies fn again, at most
// maxWriteAttempts times. With an etag, the change applies only to the
// state the etag names, and is ABORTED otherwise. Changes of one
// endpoint are serialised in this process; other endpoints' changes do
// not wait for them. fn must do no network I/O.
func (s *Service) change(ctx context.Context, id, etag string, fn func(*hooklinev1.EndpointRecord) error) (*hooklinev1.EndpointRecord, error) {
	if id == "" {
		return nil, invalid("id", "is required")
	}
	unlock, err := s.locks.lock(ctx, "endpoint:"+id)
	if err != nil {
		return nil, status.FromContextError(err).Err()
	}
	defer unlock()
	for attempt := 1; ; attempt++ {
		cur, err := s.owned(ctx, id)
		if err != nil {
			return nil, err
		}
		if etag != "" && etag != Etag(cur) {
			return nil, status.Errorf(codes.Aborted, "endpoint %s changed since etag %q was read (now %q); re-read it with GetEndpoint and apply your change again", id, etag, Etag(cur))
		}
		rec := proto.Clone(cur).(*hooklinev1.EndpointRecord)
		if err := fn(rec); err != nil {
			return nil, err
		}
		rec.Version = cur.GetVersion() + 1
		rec.Endpoint.UpdatedAt = timestamppb.New(s.now())
		err = s.writeEndpoint(ctx, id, rec)
		switch {
		case err == nil:
			return rec, nil
		case !errors.Is(err, endpoints.ErrLost):
			return nil, err
		case etag != "":
			return nil, status.Errorf(codes.Aborted, "endpoint %s was changed concurrently since etag %q was read; re-read it with GetEndpoint and apply your change again", id, etag)
		case attempt == maxWriteAttempts:
			return nil, status.Errorf(codes.Aborted, "endpoint %s: %d concurrent changes came first; re-read it and retry", id, attempt)
		}
		// The view has read past our record, so it holds what won.
	}
}

func (h *endpointService) UpdateEndpoint(ctx context.Context, req *hooklinev1.UpdateEndpointRequest) (*hooklinev1.UpdateEndpointResponse, error) {
	s := h.s
	paths := req.GetUpdateMask().GetPaths()
	if len(paths) == 0 {
		return nil, invalid("update_mask", "is required; name the fields to change, e.g. paths: [\"url\"]")
	}
	in := req.GetEndpoint()
	for _, p := range paths {
		if p == "url" {
			// Resolved before any lock is taken: a slow DNS answer delays
			// this call only.
			if err := s.validateURL(ctx, in.GetUrl()); err != nil {
				return nil, err
			}
			s.noteURL(ctx, in.GetUrl())
		}
	}
	rec, err := s.change(ctx, in.GetId(), in.GetEtag(), func(rec *hooklinev1.EndpointRecord) error {
		ep := rec.Endpoint
		for _, p := range paths {
			var err error
			switch p {
			case "url":
				ep.Url = in.GetUrl() // validated above
			case "description":
				if len(in.GetDescription()) > maxDescriptionLen {
					err = invalid("description", "is %d bytes, the limit is %d", len(in.GetDescription()), maxDescriptionLen)
				}
				ep.Description = in.GetDescription()
			case "event_types":
				err, ep.EventTypes = validateEventTypes(in.GetEventTypes()), in.GetEventTypes()
			case "timeout":
				err, ep.Timeout = validateTimeout(in.GetTimeout()), in.GetTimeout()
			case "max_in_flight":
				err, ep.MaxInFlight = validateMaxInFlight(in.GetMaxInFlight()), in.GetMaxInFlight()
			case "rate_limit_per_second":
				err, ep.RateLimitPerSecond = validateRate(in.GetRateLimitPerSecond()), in.GetRateLimitPerSecond()
			case "retry_policy":
				err, ep.RetryPolicy = validateRetryPolicy(in.GetRetryPolicy()), in.GetRetryPolicy()
			case "metadata":
				err, ep.Metadata = validateMetadata(in.GetMetadata()), in.GetMetadata()
			case "outage_mode_disabled":
				ep.OutageModeDisabled = in.GetOutageModeDisabled()
			case "ordering":
				err, ep.Ordering = validateOrdering(in.GetOrdering()), in.GetOrdering()
			case "on_head_failure":
				err, ep.OnHeadFailure = validateHeadFailure(in.GetOnHeadFailure()), in.GetOnHeadFailure()
			case "filter":
				err, ep.Filter = s.validateFilter(in.GetFilter()), in.GetFilter()
			case "transformation":
				err, ep.Transformation = s.validateTransformation(in.GetTransformation()), in.GetTransformation()
			default:
				err = invalid("update_mask", "cannot update %q; updatable: url, description, event_types, timeout, max_in_flight, rate_limit_per_second, retry_policy, metadata, outage_mode_disabled, ordering, on_head_failure, filter, transformation (status and secret have their own calls)", p)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &hooklinev1.UpdateEndpointResponse{Endpoint: withEtag(rec)}, nil
}

func (h *endpointService) DeleteEndpoint(ctx context.Context, req *hooklinev1.DeleteEndpointRequest) (*hooklinev1.DeleteEndpointResponse, error) {
	s := h.s
	if req.GetId() == "" {
		return nil, invalid("id", "is required")
	}
	unlock, err := s.locks.lock(ctx, "endpoint:"+req.GetId())
	if err != nil {
		return nil, status.FromContextError(err).Err()
	}
	defer unlock()
	rec, err := s.owned(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	// A tombstone: it always applies, and every change written from an
	// older state loses to it. Compaction removes the endpoint's history.
	if err := s.writeEndpoint(ctx, rec.GetEndpoint().GetId(), nil); err != nil {
		if errors.Is(err, endpoints.ErrLost) {
			return nil, status.Errorf(codes.Internal, "endpoint %s: tombstone ignored", req.GetId())
		}
		return nil, err
	}
	return &hooklinev1.DeleteEndpointResponse{}, nil
}

func (h *endpointService) PauseEndpoint(ctx context.Context, req *hooklinev1.PauseEndpointRequest) (*hooklinev1.PauseEndpointResponse, error) {
	s := h.s
	if len(req.GetReason()) > maxDescriptionLen {
		return nil, invalid("reason", "is %d bytes, the limit is %d", len(req.GetReason()), maxDescriptionLen)
	}
	paused := false
	rec, err := s.change(ctx, req.GetId(), "", func(rec *hooklinev1.EndpointRecord) error {
		paused = false // fn runs again after losing to a concurrent change
		if rec.Endpoint.Status == hooklinev1.EndpointStatus_ENDPOINT_STATUS_PAUSED {
			return nil
		}
		paused = true
		rec.Endpoint.Status = hooklinev1.EndpointStatus_ENDPOINT_STATUS_PAUSED
		rec.Endpoint.PausedReason = req.GetReason()
		rec.Endpoint.PausedAt = timestamppb.New(s.now())
		return nil
	})
	if err != nil {
		return nil, err
	}
	if paused {
		// The endpoint's owner hears of it once, like an automatic pause.
		ep := rec.GetEndpoint()
		n := &hooklinev1.Notice{
			NoticeId: ids.New(ids.Notice, s.now()), Type: hooklinev1.NoticeType_NOTICE_TYPE_ENDPOINT_PAUSED,
			TenantId: ep.GetTenantId(), EndpointId: ep.GetId(), At: ep.GetPausedAt(), Detail: "paused by API: " + req.GetReason(),
		}
		if r, err := hkafka.Record(s.topics.Notices, ep.GetId(), n); err == nil {
			if err := s.produce(ctx, r); err != nil {
				// The pause itself is durable; only the notice is missing.
				s.log.WarnContext(ctx, "endpoint paused but its endpoint.paused notice was not written", "endpoint_id", ep.GetId(), "err", err)
			}
		}
	}
	return &hooklinev1.PauseEndpointResponse{Endpoint: withEtag(rec)}, nil
}

func (h *endpointService) ResumeEndpoint(ctx context.Context, req *hooklinev1.ResumeEndpointRequest) (*hooklinev1.ResumeEndpointResponse, error) {
	s := h.s
	rec, err := s.change(ctx, req.GetId(), "", func(rec *hooklinev1.EndpointRecord) error {
		rec.Endpoint.Status = hooklinev1.EndpointStatus_ENDPOINT_STATUS_ACTIVE
		rec.Endpoint.PausedReason = ""
		rec.Endpoint.PausedAt = nil
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &hooklinev1.ResumeEndpointResponse{Endpoint: withEtag(rec)}, nil
}

func (h *endpointService) RotateEndpointSecret(ctx context.Context, req *hooklinev1.RotateEndpointSecretRequest) (*hooklinev1.RotateEndpointSecretResponse, error) {
	s := h.s
	given := req.GetSecret()
	scheme := req.GetSignatureScheme()
	if given != "" || scheme != hooklinev1.SignatureScheme_SIGNATURE_SCHEME_UNSPECIFIED {
		var err error
		if scheme, err = givenSecret("secret", given, scheme); err != nil {
			return nil, err
		}
	}
	grace := defaultGrace
	if g := req.GetGracePeriod(); g != nil {
		if g.CheckValid() != nil || g.AsDuration() < 0 || g.AsDuration() > maxGrace {
			return nil, invalid("grace_period", "must be between 0 and %v", maxGrace)
		}
		grace = g.AsDuration()
	}
	var secret string
	var cur *hooklinev1.EndpointSecret
	rec, err := s.change(ctx, req.GetId(), "", func(rec *hooklinev1.EndpointRecord) error {
		if given != "" {
			dup, err := s.holds(rec, given)
			if err != nil {
				return err
			}
			if dup {
				return invalid("secret", "is already one of the endpoint's secrets")
			}
		}
		sch := scheme
		if sch == hooklinev1.SignatureScheme_SIGNATURE_SCHEME_UNSPECIFIED {
			sch = rec.GetEndpoint().GetSignatureScheme()
		}
		secret = newSecret(given, sch)
		if err := s.rotate(rec, secret, grace, s.now()); err != nil {
			return err
		}
		cur = rec.GetSecrets()[0]
		return nil
	})
	if err != nil {
		return nil, err
	}
	shownSecret, publicKey := shown(cur, secret)
	return &hooklinev1.RotateEndpointSecretResponse{Endpoint: withEtag(rec), Secret: shownSecret, PublicKey: publicKey}, nil
}
