package ingest

import (
	"context"
	"encoding/json"
	"slices"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/filter"
	"github.com/hookline/hookline/sdk/ids"
	"github.com/hookline/hookline/services/ingest/apikey"
	"github.com/hookline/hookline/services/ingest/idempotency"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// PublishEvent validates the event, fans it out to the matching (or the
// named) endpoints of the caller's tenant, and returns once every Delivery
// record is acknowledged by all in-sync replicas. Many concurrent calls
// share producer batches; none waits for another's records. With an
// idempotency key, a repeat of the same request returns the first
// response and writes nothing new (idempotency.Publisher).
func (h *eventService) PublishEvent(ctx context.Context, req *hooklinev1.PublishEventRequest) (*hooklinev1.PublishEventResponse, error) {
	resp, err := h.publishEvent(ctx, req)
	if err == nil {
		// The RPC's span is where a person finds an event's trace.
		trace.SpanFromContext(ctx).SetAttributes(
			attribute.String("hookline.event_id", resp.GetEventId()),
			attribute.String("hookline.event_type", req.GetEventType()),
			attribute.Int("hookline.deliveries", len(resp.GetDeliveries())))
	}
	return resp, err
}

func (h *eventService) publishEvent(ctx context.Context, req *hooklinev1.PublishEventRequest) (*hooklinev1.PublishEventResponse, error) {
	s := h.s
	// The answer comes within --publish-timeout, whatever Kafka does:
	// every step below (barriers, claim, writes) shares this bound, and a
	// write still in flight at its end is answered UNAVAILABLE though it
	// may land later (hence: retry with the same idempotency key).
	ctx, cancel := context.WithTimeoutCause(ctx, s.cfg.PublishTimeout, errPublishTimeout)
	defer cancel()
	tenant := apikey.TenantFrom(ctx)
	if err := filter.ValidateType(req.GetEventType()); err != nil {
		return nil, invalid("event_type", "%v", err)
	}
	payload := req.GetPayload()
	if len(payload) == 0 {
		return nil, invalid("payload", "is required (a JSON document)")
	}
	if err := payloadLimit(s.cfg.MaxPayloadBytes).check(len(payload)); err != nil {
		return nil, err
	}
	if !json.Valid(payload) {
		return nil, invalid("payload", "is not valid JSON; receivers get it as application/json (over HTTP/JSON, %s)", payloadForm)
	}
	// idempotency_key, ordering_key and metadata: the proto's rules
	// (fieldrules.go).
	// Bounded memory: a call waits for Kafka only within the bytes every
	// call in flight may hold together; beyond them it waits its turn
	// briefly or is pushed back (the fan-out is the endpoints known now:
	// an estimate).
	fanout := len(req.GetEndpointIds())
	if fanout == 0 {
		fanout = len(s.store.Matching(tenant, req.GetEventType()))
	}
	n := cost(len(payload), fanout)
	if !s.admission.admit(ctx, n, queueWait) {
		return nil, s.admission.pushBack(n)
	}
	defer s.admission.release(ctx, n)
	// What targets reserves of the tenant's held budget, until the call ends.
	ctx, endHeld := s.held.scope(ctx)
	defer endHeld()
	if req.GetIdempotencyKey() != "" {
		return s.idempotent.Publish(ctx, tenant, req)
	}

	targets, err := s.fanout.targets(ctx, tenant, req)
	if err != nil {
		return nil, err
	}
	now := s.now()
	eventID := ids.New(ids.Event, now)
	resp := &hooklinev1.PublishEventResponse{EventId: eventID, Deliveries: make([]*hooklinev1.DeliveryRef, 0, len(targets))}
	created := timestamppb.New(now)
	for _, ep := range targets {
		resp.Deliveries = append(resp.Deliveries, &hooklinev1.DeliveryRef{DeliveryId: ids.New(ids.Delivery, now), EndpointId: ep.GetEndpoint().GetId()})
	}
	// Each record is encoded only when the window has room for it.
	if err := s.fanout.writeDeliveries(ctx, len(targets), func(i int) *hooklinev1.Delivery {
		ref := resp.GetDeliveries()[i]
		d := &hooklinev1.Delivery{
			DeliveryId:  ref.GetDeliveryId(),
			EventId:     eventID,
			TenantId:    tenant,
			EndpointId:  ref.GetEndpointId(),
			EventType:   req.GetEventType(),
			Payload:     payload,
			Attempt:     1,
			CreatedAt:   created,
			Kind:        hooklinev1.DeliveryKind_DELIVERY_KIND_FIRST,
			OrderingKey: req.GetOrderingKey(),
		}
		s.content.transformDelivery(ctx, targets[i].GetEndpoint(), d)
		return d
	}); err != nil {
		return nil, err
	}
	return resp, nil
}

// publishClaimed writes the deliveries of c, a whole idempotency claim
// record, for req (idempotency.Deps.Deliver): with the claim's ids, so a
// repeat writes the same deliveries again rather than new ones.
func (f *fanOut) publishClaimed(ctx context.Context, c *hooklinev1.IdempotencyRecord, req *hooklinev1.PublishEventRequest) error {
	refs := idempotency.Deliveries(c)
	return f.writeDeliveries(ctx, len(refs), func(i int) *hooklinev1.Delivery {
		ref := refs[i]
		d := &hooklinev1.Delivery{
			DeliveryId:     ref.GetDeliveryId(),
			EventId:        c.GetEventId(),
			TenantId:       c.GetTenantId(),
			EndpointId:     ref.GetEndpointId(),
			EventType:      req.GetEventType(),
			Payload:        req.GetPayload(),
			Attempt:        1,
			CreatedAt:      c.GetCreatedAt(),
			Kind:           hooklinev1.DeliveryKind_DELIVERY_KIND_FIRST,
			IdempotencyKey: c.GetIdempotencyKey(),
			OrderingKey:    req.GetOrderingKey(),
		}
		// The endpoint as it is now: a repeat after the transformation
		// changed runs the new one (the claim holds ids, not bodies).
		if ep := f.store.Get(ref.GetEndpointId()); ep != nil && ep.GetEndpoint().GetTenantId() == c.GetTenantId() {
			f.content.transformDelivery(ctx, ep.GetEndpoint(), d)
		}
		return d
	})
}

// targets returns the endpoints an event goes to: the named ones, which
// must all be the caller's, or every endpoint whose event-type filter and
// content filter match (a named endpoint gets the event whatever its
// filters say: naming is the caller's choice). It
// reads the endpoints view after a barrier, so an endpoint created or
// changed through any replica before this call began is seen (the
// barrier's rounds are shared by concurrent publishes).
func (f *fanOut) targets(ctx context.Context, tenant string, req *hooklinev1.PublishEventRequest) ([]*hooklinev1.EndpointRecord, error) {
	if err := f.store.Barrier(ctx); err != nil { // bounded by the publish's timeout
		return nil, kafkaStatus(ctx, "endpoints not read", err)
	}
	if len(req.GetEndpointIds()) == 0 {
		return f.checkTargets(ctx, tenant, req, f.content.matchContent(ctx, req, f.store.Matching(tenant, req.GetEventType())))
	}
	named := slices.Clone(req.GetEndpointIds())
	slices.Sort(named)
	named = slices.Compact(named)
	out := make([]*hooklinev1.EndpointRecord, 0, len(named))
	for _, id := range named {
		rec, err := f.endpoints.owned(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return f.checkTargets(ctx, tenant, req, out)
}

// checkTargets returns out, the targets of req, once they are within the
// fan-out limit and the tenant's held budget (reserved on ctx's scope).
func (f *fanOut) checkTargets(ctx context.Context, tenant string, req *hooklinev1.PublishEventRequest, out []*hooklinev1.EndpointRecord) ([]*hooklinev1.EndpointRecord, error) {
	if err := f.checkFanOut(len(req.GetPayload()), len(out)); err != nil {
		return nil, err
	}
	if err := f.held.reserve(ctx, tenant, out, len(req.GetPayload())); err != nil {
		return nil, err
	}
	return out, nil
}
