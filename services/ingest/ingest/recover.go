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
func (h *deliveryService) RecoverEndpoint(req *hooklinev1.RecoverEndpointRequest, stream grpc.ServerStreamingServer[hooklinev1.RecoverEndpointResponse]) error {
	s := h.s
	ctx := stream.Context()
	ep, err := s.endpoints.owned(ctx, req.GetEndpointId())
	if err != nil {
		return err
	}
	if ep.GetEndpoint().GetStatus() == hooklinev1.EndpointStatus_ENDPOINT_STATUS_PAUSED {
		return status.Errorf(codes.FailedPrecondition, "endpoint %s is paused; resume it before recovering", req.GetEndpointId())
	}
	since, until := req.GetSince().AsTime(), s.now() // since is required: the proto's rule
	if req.GetUntil() != nil {
		until = req.GetUntil().AsTime()
	}
	if !since.Before(until) {
		return invalid("until", "must be after since")
	}
	tenant := apikey.TenantFrom(ctx)
	todo, unavailable, err := s.deliveries.redeliverFailed(ctx, tenant, req.GetEndpointId(), since, until)
	if err != nil {
		return err
	}

	var last *hooklinev1.RecoverEndpointResponse
	for {
		changed := s.deliveries.indexFollow.Changed()
		p := &hooklinev1.RecoverEndpointResponse{Total: uint32(len(todo)), Unavailable: uint32(unavailable)}
		for _, d := range todo {
			state, ok, err := s.deliveries.history.OutcomeOf(tenant, d.id, d.attempt)
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

// Recover writes its deliveries in batches of at most recoverBatchBytes
// of encoded records (or recoverBatchRecords), each admitted by
// --max-in-flight-bytes like a publish and acknowledged by Kafka before
// the next is read: a recover holds one batch of payloads, never its
// window's.
const (
	recoverBatchBytes   = fanOutWindow
	recoverBatchRecords = 500
)

// recovered is one delivery a recover wrote: its id and the attempt
// number whose outcome the progress waits for.
type recovered struct {
	id      string
	attempt uint32
}

// redeliverFailed writes, once each, the tenant's deliveries to endpoint
// that failed or expired in [since, until) again (kind RECOVER, due now,
// the next attempt number), and returns them and how many more matched
// but have no payload left. The caller checked the endpoint.
//
// It counts the window first, from the index's payload-free entries, and
// refuses one over --recover-max-deliveries before any payload is read;
// then it reads, encodes and writes the deliveries a batch at a time.
func (dh *deliveryHistory) redeliverFailed(ctx context.Context, tenant, endpoint string, since, until time.Time) ([]recovered, int, error) {
	if w := until.Sub(since); w > dh.recoverMaxWindow {
		return nil, 0, invalid("since", "the window since..until is %v, the limit is %v (--recover-max-window); recover it in parts", w.Round(time.Second), dh.recoverMaxWindow)
	}
	if err := dh.syncIndex(ctx); err != nil {
		return nil, 0, err
	}
	limit := dh.recoverMaxDeliveries
	ids, err := dh.history.FailedIDs(tenant, endpoint, since, until, limit+1)
	if err != nil {
		return nil, 0, historyStatus(err)
	}
	if len(ids) > limit {
		return nil, 0, status.Errorf(codes.ResourceExhausted, "more than %d deliveries failed in the window, the limit per call is %d (--recover-max-deliveries); recover a shorter window, in parts", limit, limit)
	}
	var (
		done        = make([]recovered, 0, len(ids))
		unavailable int
		batch       []*kgo.Record
		batchBytes  int
	)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		n := int64(batchBytes) + callOverhead
		if err := dh.admission.admitWrite(ctx, n); err != nil {
			return err
		}
		err := dh.kafka.produce(ctx, batch...)
		dh.admission.release(ctx, n)
		written := len(done) - len(batch)
		clear(batch)
		batch, batchBytes = batch[:0], 0
		if err != nil {
			return kafkaStatus(ctx, fmt.Sprintf("recovery not accepted after %d of %d deliveries were written (recover again: those may be sent twice)", written, len(ids)), err)
		}
		return nil
	}
	for _, id := range ids {
		d, found, err := dh.history.Redeliverable(tenant, id, since, until)
		switch {
		case err != nil:
			return nil, 0, historyStatus(err)
		case !found: // delivered (or otherwise settled) since it was counted
			continue
		case d == nil:
			unavailable++
			continue
		}
		d.Kind = hooklinev1.DeliveryKind_DELIVERY_KIND_RECOVER
		d.DueAt = nil
		r, err := hkafka.Record(dh.topics.Deliveries, d.GetEndpointId(), d)
		if err != nil {
			return nil, 0, status.Errorf(codes.Internal, "encode delivery: %v", err)
		}
		if batchBytes > 0 && batchBytes+len(r.Key)+len(r.Value) > recoverBatchBytes {
			if err := flush(); err != nil {
				return nil, 0, err
			}
		}
		batch = append(batch, r)
		batchBytes += len(r.Key) + len(r.Value)
		done = append(done, recovered{id: d.GetDeliveryId(), attempt: d.GetAttempt()})
		if len(batch) >= recoverBatchRecords {
			if err := flush(); err != nil {
				return nil, 0, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, 0, err
	}
	return done, unavailable, nil
}
