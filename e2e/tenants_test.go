package e2e

import (
	"net/http"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Every RPC that names another tenant's endpoint, event or delivery is
// NOT_FOUND, as for a missing id, and writes nothing to any topic; and a
// call without a valid key is UNAUTHENTICATED.
func TestEveryRPCDeniesAnotherTenantAndWritesNothing(t *testing.T) {
	st := startStack(t)
	rx := newReceiver(t, http.StatusOK)
	ep := st.createEndpoint(rx.URL).GetEndpoint()
	pub := st.publish("invoice.paid", `{}`)
	dlv := pub.GetDeliveries()[0].GetDeliveryId()
	st.readN(st.topics.Results, 1)

	conn := st.startReplica()
	endpoints := hooklinev1.NewEndpointServiceClient(conn)
	events := hooklinev1.NewEventServiceClient(conn)
	deliveries := hooklinev1.NewDeliveryServiceClient(conn)
	lanes := hooklinev1.NewLaneServiceClient(conn)
	topics := []string{st.topics.Endpoints, st.topics.Deliveries, st.topics.Idempotency, st.topics.Results, st.topics.Dead, st.topics.Lanes}
	written := func() int64 {
		var n int64
		for _, tp := range topics {
			n += st.endOffsets(tp)
		}
		return n
	}
	before := written()

	calls := []struct {
		name string
		call func() error
	}{
		{"GetEndpoint", func() error {
			_, err := endpoints.GetEndpoint(st.ctxAs(otherTenantKey), &hooklinev1.GetEndpointRequest{Id: ep.GetId()})
			return err
		}},
		{"UpdateEndpoint", func() error {
			_, err := endpoints.UpdateEndpoint(st.ctxAs(otherTenantKey), &hooklinev1.UpdateEndpointRequest{
				Endpoint: &hooklinev1.Endpoint{Id: ep.GetId(), Description: "mine now"}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"description"}}})
			return err
		}},
		{"DeleteEndpoint", func() error {
			_, err := endpoints.DeleteEndpoint(st.ctxAs(otherTenantKey), &hooklinev1.DeleteEndpointRequest{Id: ep.GetId()})
			return err
		}},
		{"PauseEndpoint", func() error {
			_, err := endpoints.PauseEndpoint(st.ctxAs(otherTenantKey), &hooklinev1.PauseEndpointRequest{Id: ep.GetId()})
			return err
		}},
		{"ResumeEndpoint", func() error {
			_, err := endpoints.ResumeEndpoint(st.ctxAs(otherTenantKey), &hooklinev1.ResumeEndpointRequest{Id: ep.GetId()})
			return err
		}},
		{"RotateEndpointSecret", func() error {
			_, err := endpoints.RotateEndpointSecret(st.ctxAs(otherTenantKey), &hooklinev1.RotateEndpointSecretRequest{Id: ep.GetId()})
			return err
		}},
		{"PublishEvent to the endpoint", func() error {
			_, err := events.PublishEvent(st.ctxAs(otherTenantKey), &hooklinev1.PublishEventRequest{EventType: "a.b", Payload: []byte(`{}`), EndpointIds: []string{ep.GetId()}})
			return err
		}},
		{"PublishEvent to the endpoint with a key", func() error {
			_, err := events.PublishEvent(st.ctxAs(otherTenantKey), &hooklinev1.PublishEventRequest{EventType: "a.b", Payload: []byte(`{}`), EndpointIds: []string{ep.GetId()}, IdempotencyKey: "k"})
			return err
		}},
		{"GetEvent", func() error {
			_, err := deliveries.GetEvent(st.ctxAs(otherTenantKey), &hooklinev1.GetEventRequest{EventId: pub.GetEventId()})
			return err
		}},
		{"GetDelivery", func() error {
			_, err := deliveries.GetDelivery(st.ctxAs(otherTenantKey), &hooklinev1.GetDeliveryRequest{DeliveryId: dlv})
			return err
		}},
		{"ListDeliveries by event", func() error {
			_, err := deliveries.ListDeliveries(st.ctxAs(otherTenantKey), &hooklinev1.ListDeliveriesRequest{EventId: pub.GetEventId()})
			return err
		}},
		{"ListDeliveries by endpoint", func() error {
			_, err := deliveries.ListDeliveries(st.ctxAs(otherTenantKey), &hooklinev1.ListDeliveriesRequest{EndpointId: ep.GetId()})
			return err
		}},
		{"ResendDelivery", func() error {
			_, err := deliveries.ResendDelivery(st.ctxAs(otherTenantKey), &hooklinev1.ResendDeliveryRequest{DeliveryId: dlv})
			return err
		}},
		{"SendTestEvent", func() error {
			_, err := deliveries.SendTestEvent(st.ctxAs(otherTenantKey), &hooklinev1.SendTestEventRequest{EndpointId: ep.GetId()})
			return err
		}},
		{"ListBlockedLanes", func() error {
			_, err := lanes.ListBlockedLanes(st.ctxAs(otherTenantKey), &hooklinev1.ListBlockedLanesRequest{EndpointId: ep.GetId()})
			return err
		}},
		{"SkipLaneHead", func() error {
			_, err := lanes.SkipLaneHead(st.ctxAs(otherTenantKey), &hooklinev1.SkipLaneHeadRequest{EndpointId: ep.GetId(), DeliveryId: dlv})
			return err
		}},
		{"ResendLaneHead", func() error {
			_, err := lanes.ResendLaneHead(st.ctxAs(otherTenantKey), &hooklinev1.ResendLaneHeadRequest{EndpointId: ep.GetId(), DeliveryId: dlv})
			return err
		}},
		{"RecoverEndpoint", func() error {
			s, err := deliveries.RecoverEndpoint(st.ctxAs(otherTenantKey), &hooklinev1.RecoverEndpointRequest{EndpointId: ep.GetId(), Since: timestamppb.New(time.Now().Add(-time.Hour))})
			if err == nil {
				_, err = s.Recv()
			}
			return err
		}},
	}
	for _, tt := range calls {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); status.Code(err) != codes.NotFound {
				t.Fatalf("want NotFound, got %v", err)
			}
		})
	}
	list, err := endpoints.ListEndpoints(st.ctxAs(otherTenantKey), &hooklinev1.ListEndpointsRequest{})
	if err != nil || len(list.GetEndpoints()) != 0 {
		t.Fatalf("ListEndpoints as another tenant: %v, %v; want none", list, err)
	}
	if _, err := endpoints.ListEndpoints(st.ctxAs("not-a-key"), &hooklinev1.ListEndpointsRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("unknown key: want Unauthenticated, got %v", err)
	}
	if after := written(); after != before {
		t.Fatalf("cross-tenant calls wrote %d records", after-before)
	}
	got, err := st.endpoints().GetEndpoint(st.ctx(), &hooklinev1.GetEndpointRequest{Id: ep.GetId()})
	if err != nil || got.GetEndpoint().GetStatus() != hooklinev1.EndpointStatus_ENDPOINT_STATUS_ACTIVE || got.GetEndpoint().GetDescription() != ep.GetDescription() {
		t.Fatalf("the owner's endpoint changed: %v, %v", got, err)
	}
}
