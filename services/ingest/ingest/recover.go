package ingest

import (
	"context"
	"fmt"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/services/ingest/apikey"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// RecoverEndpoint redelivers every delivery to the endpoint that failed
// or expired in the window, once each (kind RECOVER, due now, the next
// attempt number, same ids and body), then streams progress until each
// has a new outcome or the caller goes away. A delivery delivered in the
// meantime is no longer failed, so a second recover of the same window
// does not send it again.
func (s *Service) RecoverEndpoint(req *hooklinev1.RecoverEndpointRequest, stream grpc.ServerStreamingServer[hooklinev1.RecoverEndpointResponse]) error {
	ctx := stream.Context()
	ep, err := s.owned(ctx, req.GetEndpointId())
	if err != nil {
		return err
	}
	if ep.GetEndpoint().GetStatus() == hooklinev1.EndpointStatus_ENDPOINT_STATUS_PAUSED {
		return status.Errorf(codes.FailedPrecondition, "endpoint %s is paused; resume it before recovering", req.GetEndpointId())
	}
	if req.GetSince() == nil {
		return invalid("since", "is required")
	}
	since, until := req.GetSince().AsTime(), s.now()
	if req.GetUntil() != nil {
		until = req.GetUntil().AsTime()
	}
	if !since.Before(until) {
		return invalid("until", "must be after since")
	}
	tenant := apikey.TenantFrom(ctx)
	todo, unavailable, err := s.redeliverFailed(ctx, tenant, req.GetEndpointId(), since, until)
	if err != nil {
		return err
	}

	var last *hooklinev1.RecoverEndpointResponse
	for {
		changed := s.indexFollow.Changed()
		p := &hooklinev1.RecoverEndpointResponse{Total: uint32(len(todo)), Unavailable: uint32(unavailable)}
		for _, d := range todo {
			state, ok, err := s.history.OutcomeOf(tenant, d.GetDeliveryId(), d.GetAttempt())
			switch {
			case err != nil:
				return historyStatus(err)
			case !ok:
			case state == hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED:
				p.Delivered++
			case state == hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED:
				p.Retrying++
			default:
				p.Failed++
			}
		}
		p.Done = p.GetDelivered()+p.GetFailed()+p.GetRetrying() == p.GetTotal()
		if last == nil || !proto.Equal(p, last) {
			if err := stream.Send(p); err != nil {
				return fmt.Errorf("recover: send progress: %w", err)
			}
			last = p
		}
		if p.GetDone() {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

// redeliverFailed writes, once each, the tenant's deliveries to endpoint
// that failed or expired in [since, until) again (kind RECOVER, due now,
// the next attempt number), and returns them and how many more matched
// but have no payload left. The caller checked the endpoint.
func (s *Service) redeliverFailed(ctx context.Context, tenant, endpoint string, since, until time.Time) ([]*hooklinev1.Delivery, int, error) {
	if w := until.Sub(since); w > s.cfg.RecoverMaxWindow {
		return nil, 0, invalid("since", "the window since..until is %v, the limit is %v (--recover-max-window); recover it in parts", w.Round(time.Second), s.cfg.RecoverMaxWindow)
	}
	if err := s.syncIndex(ctx); err != nil {
		return nil, 0, err
	}
	todo, unavailable, err := s.history.FailedIn(tenant, endpoint, since, until)
	if err != nil {
		return nil, 0, historyStatus(err)
	}
	if len(todo) > s.cfg.RecoverMaxDeliveries {
		return nil, 0, status.Errorf(codes.ResourceExhausted, "%d deliveries failed in the window, the limit per call is %d (--recover-max-deliveries); recover a shorter window, in parts", len(todo), s.cfg.RecoverMaxDeliveries)
	}
	recs := make([]*kgo.Record, 0, len(todo))
	for _, d := range todo {
		d.Kind = hooklinev1.DeliveryKind_DELIVERY_KIND_RECOVER
		d.DueAt = nil
		r, err := hkafka.Record(s.topics.Deliveries, d.GetEndpointId(), d)
		if err != nil {
			return nil, 0, status.Errorf(codes.Internal, "encode delivery: %v", err)
		}
		recs = append(recs, r)
	}
	if len(recs) > 0 {
		if err := s.produce(ctx, recs...); err != nil {
			return nil, 0, kafkaStatus(ctx, "recovery not accepted", err)
		}
	}
	return todo, unavailable, nil
}
