package ingest

import (
	"context"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/sdk/ids"
	"github.com/hookline/hookline/services/ingest/apikey"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// syncIndex waits until the delivery index holds every delivery, result
// and dead letter committed before the call, so an answer reflects at
// least what was in Kafka when the call arrived.
// One ListOffsets lists the three topics' ends, shared by every read
// that arrives while the previous one is in flight (Follower.SyncAll).
func (dh *deliveryHistory) syncIndex(ctx context.Context) error {
	if err := dh.indexFollow.SyncAll(ctx); err != nil {
		return kafkaStatus(ctx, "delivery index", err)
	}
	return nil
}

// historyStatus is the caller's status for a failed read of the history
// index (a disk fault): INTERNAL, logged by the interceptor.
func historyStatus(err error) error {
	return status.Errorf(codes.Internal, "delivery history: %v", err)
}

// GetEvent returns one of the caller's events with its payload and the
// status of each of its deliveries.
func (h *deliveryService) GetEvent(ctx context.Context, req *hooklinev1.GetEventRequest) (*hooklinev1.GetEventResponse, error) {
	s := h.s
	id := req.GetEventId() // required: the proto's rule
	if !ids.Valid(ids.Event, id) {
		return nil, status.Errorf(codes.NotFound, "event %q not found", id)
	}
	if err := s.deliveries.syncIndex(ctx); err != nil {
		return nil, err
	}
	resp, ok, err := s.deliveries.history.Event(apikey.TenantFrom(ctx), id)
	if err != nil {
		return nil, historyStatus(err)
	}
	if !ok {
		return nil, status.Errorf(codes.NotFound, "event %q not found", id)
	}
	return resp, nil
}

// GetDelivery returns one of the caller's deliveries with every attempt.
func (h *deliveryService) GetDelivery(ctx context.Context, req *hooklinev1.GetDeliveryRequest) (*hooklinev1.GetDeliveryResponse, error) {
	s := h.s
	st, attempts, _, err := s.deliveries.lookupDelivery(ctx, req.GetDeliveryId())
	if err != nil {
		return nil, err
	}
	return &hooklinev1.GetDeliveryResponse{Delivery: st, Attempts: attempts}, nil
}

func (dh *deliveryHistory) lookupDelivery(ctx context.Context, id string) (*hooklinev1.DeliveryStatus, []*hooklinev1.AttemptResult, *hooklinev1.Delivery, error) {
	// Required: the requests' rule (fieldrules.go); a malformed id is
	// one that does not exist.
	if !ids.Valid(ids.Delivery, id) {
		return nil, nil, nil, status.Errorf(codes.NotFound, "delivery %q not found", id)
	}
	if err := dh.syncIndex(ctx); err != nil {
		return nil, nil, nil, err
	}
	st, attempts, d, ok, err := dh.history.Delivery(apikey.TenantFrom(ctx), id)
	if err != nil {
		return nil, nil, nil, historyStatus(err)
	}
	if !ok {
		return nil, nil, nil, status.Errorf(codes.NotFound, "delivery %q not found", id)
	}
	return st, attempts, d, nil
}

// ResendDelivery writes the delivery once more to the deliveries topic,
// due now, as a RESEND: the dispatcher attempts it once and does not
// retry it. The attempt number continues from the last attempt made.
func (h *deliveryService) ResendDelivery(ctx context.Context, req *hooklinev1.ResendDeliveryRequest) (*hooklinev1.ResendDeliveryResponse, error) {
	s := h.s
	st, attempts, d, err := s.deliveries.lookupDelivery(ctx, req.GetDeliveryId())
	if err != nil {
		return nil, err
	}
	ep := s.store.Get(st.GetEndpointId())
	switch {
	case ep == nil:
		return nil, status.Errorf(codes.FailedPrecondition, "endpoint %s of delivery %s was deleted; nothing to resend to", st.GetEndpointId(), st.GetDeliveryId())
	case ep.GetEndpoint().GetStatus() == hooklinev1.EndpointStatus_ENDPOINT_STATUS_PAUSED:
		return nil, status.Errorf(codes.FailedPrecondition, "endpoint %s is paused; resume it before resending", st.GetEndpointId())
	case d == nil:
		return nil, status.Errorf(codes.FailedPrecondition, "delivery %s: its payload is no longer retained in Kafka; it cannot be resent", st.GetDeliveryId())
	}
	next := d.GetAttempt()
	for _, a := range attempts {
		next = max(next, a.GetAttempt()+1)
	}
	d.Attempt = next
	d.Kind = hooklinev1.DeliveryKind_DELIVERY_KIND_RESEND
	d.DueAt = nil
	r, err := hkafka.Record(s.topics.Deliveries, d.GetEndpointId(), d)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encode delivery: %v", err)
	}
	// Held until Kafka confirms it, within the budget publishes share.
	n := cost(len(d.GetPayload()), 1)
	if err := s.admission.admitWrite(ctx, n); err != nil {
		return nil, err
	}
	err = s.kafka.produce(ctx, r)
	s.admission.release(ctx, n)
	if err != nil {
		return nil, kafkaStatus(ctx, "resend not accepted", err)
	}
	return &hooklinev1.ResendDeliveryResponse{Delivery: st, Attempt: next}, nil
}
