package ingest

// EndpointService's RPCs (endpointService): each checks its request
// against the rules (endpointrules.go) and writes through
// endpointwrites.go.

import (
	"context"
	"errors"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/endpoints"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/sdk/ids"
	"github.com/hookline/hookline/services/ingest/apikey"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func (h *endpointService) CreateEndpoint(ctx context.Context, req *hooklinev1.CreateEndpointRequest) (*hooklinev1.CreateEndpointResponse, error) {
	s := h.s
	tenant := apikey.TenantFrom(ctx)
	if err := s.urls.validateURL(ctx, req.GetUrl()); err != nil {
		return nil, err
	}
	s.urls.noteURL(ctx, req.GetUrl())
	if err := s.urls.validateAuthURL(ctx, req.GetAuth()); err != nil {
		return nil, err
	}
	// The fields' static rules are the proto's (fieldrules.go).
	for _, err := range []error{
		validateEventTypes(req.GetEventTypes()),
		s.content.validateFilter(req.GetFilter()),
		s.content.validateTransformation(req.GetTransformation()),
		checkBatch(&hooklinev1.Endpoint{Batch: req.GetBatch(), Ordering: req.GetOrdering()}),
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
	unlock, err := s.endpoints.locks.lock(ctx, "tenant:"+tenant)
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
			Batch:              req.GetBatch(),
		},
		Version: 1,
	}
	es, err := s.secrets.seal(rec, secret, now.AsTime())
	if err != nil {
		return nil, err
	}
	rec.Secrets = []*hooklinev1.EndpointSecret{es}
	if err := s.secrets.setAuth(rec, req.GetAuth()); err != nil {
		return nil, err
	}
	if err := s.secrets.setHeaders(rec, req.GetHeaders()); err != nil {
		return nil, err
	}
	if err := s.secrets.setClientTLS(rec, req.GetClientTls(), s.now()); err != nil {
		return nil, err
	}
	rec.Endpoint.SignatureScheme = schemeOf(es)
	if err := s.endpoints.writeEndpoint(ctx, rec.GetEndpoint().GetId(), rec); err != nil {
		if errors.Is(err, endpoints.ErrLost) { // a fresh id cannot lose
			return nil, status.Errorf(codes.Internal, "endpoint id %s taken", rec.GetEndpoint().GetId())
		}
		return nil, err
	}
	shownSecret, publicKey := shown(es, secret)
	return &hooklinev1.CreateEndpointResponse{Endpoint: withEtag(rec), Secret: shownSecret, PublicKey: publicKey}, nil
}

func (h *endpointService) GetEndpoint(ctx context.Context, req *hooklinev1.GetEndpointRequest) (*hooklinev1.GetEndpointResponse, error) {
	s := h.s
	if err := s.endpoints.readBarrier(ctx); err != nil {
		return nil, err
	}
	rec, err := s.endpoints.owned(ctx, req.GetId())
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
			if secret, err = s.secrets.open(rec, cur[0]); err != nil {
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
	if size == 0 {
		size = defaultPageSize // at most maxPageSize: the proto's rule
	}
	if err := s.endpoints.readBarrier(ctx); err != nil {
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
			if err := s.urls.validateURL(ctx, in.GetUrl()); err != nil {
				return nil, err
			}
			s.urls.noteURL(ctx, in.GetUrl())
		}
		if p == "auth" {
			if err := s.urls.validateAuthURL(ctx, in.GetAuth()); err != nil {
				return nil, err
			}
		}
	}
	rec, err := s.endpoints.change(ctx, in.GetId(), in.GetEtag(), func(rec *hooklinev1.EndpointRecord) error {
		ep := rec.Endpoint
		for _, p := range paths {
			var err error
			switch p {
			case "url":
				ep.Url = in.GetUrl() // validated above
			// The fields' static rules are the proto's (fieldrules.go).
			case "description":
				ep.Description = in.GetDescription()
			case "event_types":
				err, ep.EventTypes = validateEventTypes(in.GetEventTypes()), in.GetEventTypes()
			case "timeout":
				ep.Timeout = in.GetTimeout()
			case "max_in_flight":
				ep.MaxInFlight = in.GetMaxInFlight()
			case "rate_limit_per_second":
				ep.RateLimitPerSecond = in.GetRateLimitPerSecond()
			case "retry_policy":
				ep.RetryPolicy = in.GetRetryPolicy()
			case "metadata":
				ep.Metadata = in.GetMetadata()
			case "outage_mode_disabled":
				ep.OutageModeDisabled = in.GetOutageModeDisabled()
			case "ordering":
				ep.Ordering = in.GetOrdering()
			case "on_head_failure":
				ep.OnHeadFailure = in.GetOnHeadFailure()
			case "filter":
				err, ep.Filter = s.content.validateFilter(in.GetFilter()), in.GetFilter()
			case "transformation":
				err, ep.Transformation = s.content.validateTransformation(in.GetTransformation()), in.GetTransformation()
			case "headers":
				err = s.secrets.setHeaders(rec, in.GetHeaders())
			case "auth":
				err = s.secrets.setAuth(rec, in.GetAuth())
			case "client_tls":
				err = s.secrets.setClientTLS(rec, in.GetClientTls(), s.now())
			case "batch":
				ep.Batch = in.GetBatch() // unset turns batching off
			case "batch.max_events", "batch.max_bytes", "batch.max_wait":
				// One setting (the HTTP gateway names the fields a PATCH
				// body sets): the others are kept.
				setBatchField(ep, p, in.GetBatch())
			default:
				err = invalid("update_mask", "cannot update %q; updatable: url, description, event_types, timeout, max_in_flight, rate_limit_per_second, retry_policy, metadata, outage_mode_disabled, ordering, on_head_failure, filter, transformation, headers, auth, client_tls, batch or one of batch.max_events, batch.max_bytes, batch.max_wait (status and secret have their own calls)", p)
			}
			if err != nil {
				return err
			}
		}
		// Whichever of headers and auth the mask named first; batch with
		// the ordering it would have (either may be in the mask, or
		// neither: the check applies to what would be written).
		if err := checkAuthHeaders(ep); err != nil {
			return err
		}
		return checkBatch(ep)
	})
	if err != nil {
		return nil, err
	}
	return &hooklinev1.UpdateEndpointResponse{Endpoint: withEtag(rec)}, nil
}

func (h *endpointService) DeleteEndpoint(ctx context.Context, req *hooklinev1.DeleteEndpointRequest) (*hooklinev1.DeleteEndpointResponse, error) {
	s := h.s
	unlock, err := s.endpoints.locks.lock(ctx, "endpoint:"+req.GetId())
	if err != nil {
		return nil, status.FromContextError(err).Err()
	}
	defer unlock()
	rec, err := s.endpoints.owned(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	// A tombstone: it always applies, and every change written from an
	// older state loses to it. Compaction removes the endpoint's history.
	if err := s.endpoints.writeEndpoint(ctx, rec.GetEndpoint().GetId(), nil); err != nil {
		if errors.Is(err, endpoints.ErrLost) {
			return nil, status.Errorf(codes.Internal, "endpoint %s: tombstone ignored", req.GetId())
		}
		return nil, err
	}
	return &hooklinev1.DeleteEndpointResponse{}, nil
}

func (h *endpointService) PauseEndpoint(ctx context.Context, req *hooklinev1.PauseEndpointRequest) (*hooklinev1.PauseEndpointResponse, error) {
	s := h.s
	paused := false
	rec, err := s.endpoints.change(ctx, req.GetId(), "", func(rec *hooklinev1.EndpointRecord) error {
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
			if err := s.kafka.produce(ctx, r); err != nil {
				// The pause itself is durable; only the notice is missing.
				s.log.WarnContext(ctx, "endpoint paused but its endpoint.paused notice was not written", "endpoint_id", ep.GetId(), "err", err)
			}
		}
	}
	return &hooklinev1.PauseEndpointResponse{Endpoint: withEtag(rec)}, nil
}

func (h *endpointService) ResumeEndpoint(ctx context.Context, req *hooklinev1.ResumeEndpointRequest) (*hooklinev1.ResumeEndpointResponse, error) {
	s := h.s
	rec, err := s.endpoints.change(ctx, req.GetId(), "", func(rec *hooklinev1.EndpointRecord) error {
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
		grace = g.AsDuration() // 0 to 7 days: the proto's rule
	}
	var secret string
	var cur *hooklinev1.EndpointSecret
	rec, err := s.endpoints.change(ctx, req.GetId(), "", func(rec *hooklinev1.EndpointRecord) error {
		if given != "" {
			dup, err := s.secrets.holds(rec, given)
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
		if err := s.secrets.rotate(rec, secret, grace, s.now()); err != nil {
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
