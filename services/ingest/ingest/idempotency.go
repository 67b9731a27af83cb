package ingest

import (
	"context"
	"fmt"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/payloadref"
	"github.com/hookline/hookline/sdk/ids"
	"github.com/hookline/hookline/services/ingest/idempotency"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// takeoverGrace is added to the publish timeout before another process
// completes a claim whose writer has not committed it.
const takeoverGrace = 5 * time.Second

// minWait is the shortest wait for a claim's commit before looking again.
const minWait = 100 * time.Millisecond

// publishIdempotent publishes req under its idempotency key: it returns
// the key's original response when the key is live with the same
// request, refuses a different request, and otherwise claims the key and
// publishes.
func (s *Service) publishIdempotent(ctx context.Context, tenant string, req *hooklinev1.PublishEventRequest) (*hooklinev1.PublishEventResponse, error) {
	topic := s.topics.Idempotency
	k := idempotency.RecordKey(tenant, req.GetIdempotencyKey())
	hash := idempotency.RequestHash(req)
	var own *hooklinev1.IdempotencyRecord // the whole claim, when this call wrote it
	// Read every claim written before this call, by any process.
	if err := s.idemFollow.Sync(ctx, topic); err != nil {
		return nil, kafkaStatus(ctx, "idempotency key lookup", err)
	}
	if _, live := s.idem.Live(k, s.now()); !live {
		c, err := s.claimKey(ctx, tenant, k, req, hash)
		if err != nil {
			return nil, err
		}
		// claimKey marked the claim in flight here, so no other call in
		// this process takes it over while we decide.
		defer s.endFlight(c.GetClaimId())
		if w, ok := s.idem.Winner(k); ok && w.Rec.GetClaimId() == c.GetClaimId() {
			return s.completeClaim(ctx, k, c, req)
		}
		own = c
	}
	for {
		// Taken before w is (re)read, so a commit applied after the read
		// wakes the wait below.
		changed := s.idemFollow.Changed()
		w, ok := s.idem.Winner(k)
		if !ok {
			return nil, status.Error(codes.Internal, "idempotency claim disappeared")
		}
		if !idempotency.SameRequest(w.Rec.GetRequestHash(), hash) {
			return nil, invalid("idempotency_key", "%q was used at %s for a different request (event %s): event_type, payload, endpoint_ids, ordering_key and metadata must match the first use; use a new key for a new event",
				req.GetIdempotencyKey(), w.Rec.GetCreatedAt().AsTime().UTC().Format(time.RFC3339), w.Rec.GetEventId())
		}
		if w.Committed {
			full, err := s.claimRecord(ctx, w, own)
			if err != nil {
				return nil, err
			}
			return claimResponse(full), nil
		}
		// Complete the claim ourselves if its writer was this process and
		// is no longer at it (an earlier try failed), or if its writer has
		// had all the time a publish may take: writing and reading back
		// the claim, then writing the deliveries, each bounded by the
		// publish timeout.
		deadline := w.Rec.GetCreatedAt().AsTime().Add(2*s.cfg.PublishTimeout + takeoverGrace)
		if w.Rec.GetInstanceId() == s.instanceID || !s.now().Before(deadline) {
			if s.beginFlight(w.Rec.GetClaimId(), true) {
				defer s.endFlight(w.Rec.GetClaimId())
				full, err := s.claimRecord(ctx, w, own)
				if err != nil {
					return nil, err
				}
				return s.completeClaim(ctx, k, full, req)
			}
		}
		// Another writer is publishing: wait for its commit, bounded. (A
		// call in this process working on the claim wakes us by writing
		// the commit; minWait only bounds the loop if it fails.)
		wait := time.NewTimer(max(deadline.Sub(s.now()), minWait))
		select {
		case <-changed:
		case <-wait.C:
		case <-ctx.Done():
			wait.Stop()
			return nil, status.Errorf(codes.DeadlineExceeded, "idempotency_key: another request with this key is still publishing; retry with the same key")
		}
		wait.Stop()
	}
}

// claimKey writes a claim for k carrying the event id and the delivery
// ids this request would create, and waits until the view has read it,
// so the view then holds the key's winner.
func (s *Service) claimKey(ctx context.Context, tenant, k string, req *hooklinev1.PublishEventRequest, hash []byte) (*hooklinev1.IdempotencyRecord, error) {
	targets, err := s.targets(ctx, tenant, req)
	if err != nil {
		return nil, err
	}
	now := s.now()
	c := &hooklinev1.IdempotencyRecord{
		TenantId:       tenant,
		IdempotencyKey: req.GetIdempotencyKey(),
		ClaimId:        ids.New("clm_", now),
		State:          hooklinev1.IdempotencyState_IDEMPOTENCY_STATE_CLAIMED,
		RequestHash:    append([]byte{idempotency.HashVersion}, hash...),
		EventId:        ids.New(ids.Event, now),
		InstanceId:     s.instanceID,
		CreatedAt:      timestamppb.New(now),
		ExpiresAt:      timestamppb.New(now.Add(s.cfg.IdempotencyTTL)),
	}
	for _, ep := range targets {
		c.EndpointIds = append(c.EndpointIds, ep.GetEndpoint().GetId())
	}
	r, err := hkafka.Record(s.topics.Idempotency, k, c)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encode claim: %v", err)
	}
	s.beginFlight(c.GetClaimId(), false)
	ok := false
	defer func() {
		if !ok {
			s.endFlight(c.GetClaimId())
		}
	}()
	pctx, cancel := context.WithTimeout(ctx, s.cfg.PublishTimeout)
	defer cancel()
	if err := hkafka.ProduceAcked(pctx, s.kafka, r); err != nil {
		return nil, kafkaStatus(ctx, "event not accepted", err)
	}
	if err := s.idemFollow.WaitPast(pctx, r.Topic, r.Partition, r.Offset); err != nil {
		return nil, kafkaStatus(ctx, "idempotency claim not read back", err)
	}
	ok = true
	s.claims.Put(c)
	return c, nil
}

// completeClaim writes the deliveries of c, a whole claim record (with
// the claim's ids, so a repeat writes the same deliveries again rather
// than new ones) and then the COMMITTED record, and returns the claim's
// response. The caller holds the claim in flight.
func (s *Service) completeClaim(ctx context.Context, k string, c *hooklinev1.IdempotencyRecord, req *hooklinev1.PublishEventRequest) (*hooklinev1.PublishEventResponse, error) {
	refs := idempotency.Deliveries(c)
	if err := s.writeDeliveries(ctx, len(refs), func(i int) *hooklinev1.Delivery {
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
		if ep := s.store.Get(ref.GetEndpointId()); ep != nil && ep.GetEndpoint().GetTenantId() == c.GetTenantId() {
			s.transformDelivery(ctx, ep.GetEndpoint(), d)
		}
		return d
	}); err != nil {
		return nil, err
	}
	// The commit names the claim; what it fans out to stays in the claim.
	commit := proto.CloneOf(c)
	commit.Deliveries, commit.EndpointIds = nil, nil
	commit.State = hooklinev1.IdempotencyState_IDEMPOTENCY_STATE_COMMITTED
	commit.InstanceId = s.instanceID
	// The deliveries are durable: record that even if the caller has
	// gone, or its retry would write them again; but within the publish's
	// bound (publishEvent), so the answer is not late.
	cctx, cancel := context.WithoutCancel(ctx), context.CancelFunc(func() {})
	if d, ok := ctx.Deadline(); ok {
		cctx, cancel = context.WithDeadline(cctx, d)
	}
	defer cancel()
	r, err := hkafka.Record(s.topics.Idempotency, k, commit)
	if err == nil {
		err = s.produce(cctx, r)
	}
	if err == nil {
		// Hold the claim in flight until this process's view has the
		// commit, so no other call here mistakes the claim for abandoned.
		err = s.idemFollow.WaitPast(cctx, r.Topic, r.Partition, r.Offset)
	}
	if err != nil {
		// The deliveries are durable, so the answer is right. A retry
		// will find the claim uncommitted and write the same deliveries
		// again (same ids: receivers deduplicate on webhook-id).
		s.log.WarnContext(ctx, "idempotency commit not written", "claim_id", c.GetClaimId(), "err", fmt.Sprint(err))
	}
	return claimResponse(c), nil
}

// beginFlight marks claimID as being worked on by a call in this process.
// With onlyIfIdle it does so only when no other call is, and reports
// whether it did.
func (s *Service) beginFlight(claimID string, onlyIfIdle bool) bool {
	s.flightMu.Lock()
	defer s.flightMu.Unlock()
	if onlyIfIdle && s.flight[claimID] > 0 {
		return false
	}
	s.flight[claimID]++
	return true
}

func (s *Service) endFlight(claimID string) {
	s.flightMu.Lock()
	defer s.flightMu.Unlock()
	if s.flight[claimID]--; s.flight[claimID] <= 0 {
		delete(s.flight, claimID)
	}
}

// claimResponse is the response of full, a whole claim record: the same
// for the call that claimed and for every repeat, in every process.
func claimResponse(full *hooklinev1.IdempotencyRecord) *hooklinev1.PublishEventResponse {
	resp := &hooklinev1.PublishEventResponse{EventId: full.GetEventId()}
	for _, d := range idempotency.Deliveries(full) {
		resp.Deliveries = append(resp.Deliveries, proto.CloneOf(d))
	}
	return resp
}

// claimRecord returns the whole record of winner w: own when this call
// wrote it, else read back from the idempotency topic (at most once per
// claim while it is in the cache of recent claims).
func (s *Service) claimRecord(ctx context.Context, w idempotency.Claim, own *hooklinev1.IdempotencyRecord) (*hooklinev1.IdempotencyRecord, error) {
	id := w.Rec.GetClaimId()
	if own.GetClaimId() == id {
		return own, nil
	}
	if full := s.claims.Get(id); full != nil {
		return full, nil
	}
	opts, err := s.cfg.Kafka.Opts()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "idempotency claim: %v", err)
	}
	r, err := payloadref.Read(ctx, opts, w.Ref)
	if err != nil {
		return nil, kafkaStatus(ctx, "idempotency claim not read", err)
	}
	var full hooklinev1.IdempotencyRecord
	if err := hkafka.Decode(r, &full); err != nil || full.GetClaimId() != id {
		return nil, status.Errorf(codes.Internal, "idempotency claim %s: the record at %s/%d@%d is not it (%v)", id, w.Ref.GetTopic(), w.Ref.GetPartition(), w.Ref.GetOffset(), err)
	}
	s.claims.Put(&full)
	return &full, nil
}
