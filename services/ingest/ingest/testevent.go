package ingest

import (
	"context"
	"encoding/json"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/filter"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/keyring"
	"github.com/hookline/hookline/sdk/ids"
	"github.com/hookline/hookline/services/ingest/apikey"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

const (
	testEventType    = "hookline.test"
	testEventPayload = `{"test":true}`
	// testEventWait bounds how long SendTestEvent waits for the outcome
	// when the caller set no shorter deadline.
	testEventWait = time.Minute
)

// SendTestEvent writes one Delivery of kind TEST for the endpoint and
// waits for its result: the dispatcher attempts it like any delivery
// (signed, same SSRF guard), and does not retry it.
func (h *deliveryService) SendTestEvent(ctx context.Context, req *hooklinev1.SendTestEventRequest) (*hooklinev1.SendTestEventResponse, error) {
	s := h.s
	rec, err := s.endpoints.owned(ctx, req.GetEndpointId())
	if err != nil {
		return nil, err
	}
	if rec.GetEndpoint().GetStatus() == hooklinev1.EndpointStatus_ENDPOINT_STATUS_PAUSED {
		return nil, status.Errorf(codes.FailedPrecondition, "endpoint %s is paused; resume it before sending a test event", req.GetEndpointId())
	}
	typ := req.GetEventType()
	if typ == "" {
		typ = testEventType
	}
	if err := filter.ValidateType(typ); err != nil {
		return nil, invalid("event_type", "%v", err)
	}
	payload := req.GetPayload()
	if len(payload) == 0 {
		payload = []byte(testEventPayload)
	}
	if err := payloadLimit(s.cfg.MaxPayloadBytes).check(len(payload)); err != nil {
		return nil, err
	}
	if !json.Valid(payload) {
		return nil, invalid("payload", "is not valid JSON; receivers get it as application/json")
	}
	now := s.now()
	d := &hooklinev1.Delivery{
		DeliveryId: ids.New(ids.Delivery, now),
		EventId:    ids.New(ids.Event, now),
		TenantId:   apikey.TenantFrom(ctx),
		EndpointId: req.GetEndpointId(),
		EventType:  typ,
		Payload:    payload,
		Attempt:    1,
		CreatedAt:  timestamppb.New(now),
		Kind:       hooklinev1.DeliveryKind_DELIVERY_KIND_TEST,
	}
	s.keyring.AuthenticateDelivery(d, keyring.PayloadSum(d.GetPayload()))
	r, err := hkafka.Record(s.topics.Deliveries, d.GetEndpointId(), d)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encode delivery: %v", err)
	}
	// Held until Kafka confirms it, within the budget publishes share
	// (not while the outcome is awaited: that holds no more than this).
	n := cost(len(payload), 1)
	if err := s.admission.admitWrite(ctx, n); err != nil {
		return nil, err
	}
	err = s.kafka.produce(ctx, r)
	s.admission.release(ctx, n)
	if err != nil {
		return nil, kafkaStatus(ctx, "test event not accepted", err)
	}
	resp := &hooklinev1.SendTestEventResponse{EventId: d.GetEventId(), DeliveryId: d.GetDeliveryId()}
	wctx, cancel := context.WithTimeout(ctx, testEventWait)
	defer cancel()
	for {
		changed := s.deliveries.indexFollow.Changed()
		if _, attempts, _, ok, err := s.deliveries.history.Delivery(d.GetTenantId(), d.GetDeliveryId()); err != nil {
			return nil, historyStatus(err)
		} else if ok && len(attempts) > 0 {
			resp.Result = attempts[0]
			return resp, nil
		}
		select {
		case <-changed:
		case <-wctx.Done():
			return nil, status.Errorf(codes.DeadlineExceeded, "test event %s was sent (delivery %s) but its outcome was not known in time; look it up with GetDelivery", d.GetEventId(), d.GetDeliveryId())
		}
	}
}
