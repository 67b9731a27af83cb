package ingest

import (
	"context"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/lanes"
	"github.com/hookline/hookline/sdk/ids"
	"github.com/hookline/hookline/services/ingest/apikey"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// LaneService: an ordered endpoint's blocked lanes (on_head_failure
// block), read from the lanes topic the dispatchers write (s.lanes,
// followed like the other views), and the operator's commands on them,
// written to the deliveries topic for the dispatcher that owns the lane
// (see the dispatcher's lanecmd.go).

// laneCommandID is the id prefix of lane commands.
const laneCommandID = ids.LaneCommand

// syncLanes makes an answer see every lane change committed before the
// call began.
func (h *laneService) syncLanes(ctx context.Context) error {
	s := h.s
	if err := s.laneFollow.Sync(ctx, s.topics.Lanes); err != nil {
		return kafkaStatus(ctx, "lanes not read", err)
	}
	return nil
}

// laneEndpoint returns the caller's endpoint named by a LaneService
// request, after the read barriers: NOT_FOUND for another tenant's.
func (h *laneService) laneEndpoint(ctx context.Context, id string) (*hooklinev1.EndpointRecord, error) {
	s := h.s
	// endpoint_id is required: the requests' rule.
	if err := s.endpoints.readBarrier(ctx); err != nil {
		return nil, err
	}
	rec, err := s.endpoints.owned(ctx, id)
	if err != nil {
		return nil, err
	}
	return rec, h.syncLanes(ctx)
}

// ListBlockedLanes lists the endpoint's blocked lanes, by ordering key.
func (h *laneService) ListBlockedLanes(ctx context.Context, req *hooklinev1.ListBlockedLanesRequest) (*hooklinev1.ListBlockedLanesResponse, error) {
	s := h.s
	size := pageSize(req.GetPageSize())
	tenant := apikey.TenantFrom(ctx)
	query := "lanes\x00" + req.GetEndpointId()
	var after *string
	if req.GetPageToken() != "" {
		a, err := decodeToken(s.tokens, tenant, query, req.GetPageToken())
		if err != nil {
			return nil, err
		}
		after = &a
	}
	if _, err := h.laneEndpoint(ctx, req.GetEndpointId()); err != nil {
		return nil, err
	}
	resp := &hooklinev1.ListBlockedLanesResponse{}
	for _, b := range s.lanes.Blocked(req.GetEndpointId(), after) {
		if len(resp.Lanes) == size {
			resp.NextPageToken = s.tokens.Encode(tenant, query, resp.Lanes[size-1].GetOrderingKey())
			break
		}
		head := b.Head.GetBlocked()
		last := head.GetLastResult()
		resp.Lanes = append(resp.Lanes, &hooklinev1.BlockedLane{
			OrderingKey: b.Key, DeliveryId: b.Head.GetDeliveryId(), EventId: head.GetDelivery().GetEventId(),
			BlockedSince: head.GetBlockedAt(), LastAttempt: last.GetAttempt(), LastStatusCode: last.GetStatusCode(),
			LastClass: last.GetClass(), Reason: last.GetReason(), FollowersWaiting: uint32(b.Followers),
		})
	}
	return resp, nil
}

// SkipLaneHead writes a skip command for the lane's blocked head; it
// returns once the command is durable in Kafka.
func (h *laneService) SkipLaneHead(ctx context.Context, req *hooklinev1.SkipLaneHeadRequest) (*hooklinev1.SkipLaneHeadResponse, error) {
	id, err := h.laneCommand(ctx, hooklinev1.LaneOp_LANE_OP_SKIP, req.GetEndpointId(), req.GetOrderingKey(), req.GetDeliveryId())
	if err != nil {
		return nil, err
	}
	return &hooklinev1.SkipLaneHeadResponse{CommandId: id}, nil
}

// ResendLaneHead writes a resend command for the lane's blocked head; it
// returns once the command is durable in Kafka.
func (h *laneService) ResendLaneHead(ctx context.Context, req *hooklinev1.ResendLaneHeadRequest) (*hooklinev1.ResendLaneHeadResponse, error) {
	id, err := h.laneCommand(ctx, hooklinev1.LaneOp_LANE_OP_RESEND, req.GetEndpointId(), req.GetOrderingKey(), req.GetDeliveryId())
	if err != nil {
		return nil, err
	}
	return &hooklinev1.ResendLaneHeadResponse{CommandId: id}, nil
}

// laneCommand checks that delivery names the blocked head of the lane
// (endpoint, key) as of the call, and writes the command op on it to the
// deliveries topic, keyed by endpoint id. It returns the command's id.
func (h *laneService) laneCommand(ctx context.Context, op hooklinev1.LaneOp, endpoint, key, delivery string) (string, error) {
	s := h.s
	// delivery_id (a delivery id) and ordering_key: the requests' rules
	// (fieldrules.go).
	rec, err := h.laneEndpoint(ctx, endpoint)
	if err != nil {
		return "", err
	}
	if op == hooklinev1.LaneOp_LANE_OP_RESEND && rec.GetEndpoint().GetStatus() == hooklinev1.EndpointStatus_ENDPOINT_STATUS_PAUSED {
		return "", status.Errorf(codes.FailedPrecondition, "endpoint %s is paused; resume it before resending a lane's head", endpoint)
	}
	head := blockedHead(s.lanes.Snapshot(endpoint)[key])
	switch {
	case head == nil:
		return "", status.Errorf(codes.FailedPrecondition, "lane %q of endpoint %s is not blocked; list the blocked lanes again", key, endpoint)
	case head.GetDeliveryId() != delivery:
		return "", status.Errorf(codes.FailedPrecondition, "delivery %s is not the blocked head of lane %q of endpoint %s (the head is %s); list the blocked lanes again",
			delivery, key, endpoint, head.GetDeliveryId())
	}
	now := s.now()
	id := ids.New(laneCommandID, now)
	d := head.GetBlocked().GetDelivery()
	cmd := &hooklinev1.Delivery{
		DeliveryId: delivery, EventId: d.GetEventId(), TenantId: rec.GetEndpoint().GetTenantId(), EndpointId: endpoint,
		EventType: d.GetEventType(), CreatedAt: timestamppb.New(now), DueAt: timestamppb.New(now), OrderingKey: key,
		Kind:        hooklinev1.DeliveryKind_DELIVERY_KIND_LANE_COMMAND,
		LaneCommand: &hooklinev1.LaneCommand{Op: op, CommandId: id, At: timestamppb.New(now)},
	}
	r, err := hkafka.Record(s.topics.Deliveries, endpoint, cmd)
	if err != nil {
		return "", status.Errorf(codes.Internal, "encode lane command: %v", err)
	}
	if err := s.kafka.produce(ctx, r); err != nil {
		return "", kafkaStatus(ctx, "lane command not written", err)
	}
	s.log.InfoContext(ctx, "lane command written", "command_id", id, "op", op.String(), "endpoint_id", endpoint, "ordering_key", key, "delivery_id", delivery)
	return id, nil
}

// blockedHead returns the lane's blocked member, or nil.
func blockedHead(members lanes.Members) *hooklinev1.LaneMember {
	for _, m := range members {
		if m.GetBlocked() != nil {
			return m
		}
	}
	return nil
}
