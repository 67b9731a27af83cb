package ingest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/payloadref"
	"github.com/hookline/hookline/sdk/ids"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Idempotency keys (SPEC R-INGEST-2), in Kafka. Every claim on a key is a
// record on the idempotency topic keyed by tenant and key, so all records
// of one key are in one partition in one order that every ingest process
// reads the same way. The rules, applied in offset order:
//
//   - a CLAIMED record wins the key if the key has no winner, or if its
//     created_at is at or after the current winner's expires_at;
//     otherwise it loses and is ignored;
//   - a COMMITTED record marks the winner with the same claim id as
//     having its deliveries durable.
//
// The decision depends only on record contents and order, so two
// processes claiming the same key at the same moment agree on the winner.
// Only the winner (or, after it failed, a retry with the same request)
// writes deliveries, and always with the ids fixed in the claim, so a key
// yields at most one delivery id per endpoint.

// takeoverGrace is added to the publish timeout before another process
// completes a claim whose writer has not committed it.
const takeoverGrace = 5 * time.Second

// minWait is the shortest wait for a claim's commit before looking again.
const minWait = 100 * time.Millisecond

// claim is the winning claim of one key, as the view keeps it: without
// what grows with its fan-out (its endpoints, or the delivery refs of a
// claim written before endpoint_ids), which stays in the claim's record
// on the topic, named by ref and read back when needed (claimRecord). A
// claim then costs a few hundred bytes per ingest for twice the TTL,
// whatever its fan-out.
type claim struct {
	rec       *hooklinev1.IdempotencyRecord
	ref       *hooklinev1.RecordRef
	committed bool
}

// claimHashVersion starts the request hash of a claim that carries
// endpoint_ids instead of delivery refs. An ingest from before compares
// the whole hash, so it answers a repeat of such a claim
// INVALID_ARGUMENT instead of with no deliveries, and never completes it.
const claimHashVersion = 2

// sameRequest reports whether a claim's stored request hash is hash:
// bare (a claim from before endpoint_ids) or versioned.
func sameRequest(stored, hash []byte) bool {
	if len(stored) == len(hash)+1 && stored[0] == claimHashVersion {
		stored = stored[1:]
	}
	return bytes.Equal(stored, hash)
}

// claimDeliveries returns the deliveries full (a whole claim record)
// fans out to, in its response's order: the refs of a claim from before
// endpoint_ids, else one per endpoint with the id derived from the event
// id and the endpoint id.
func claimDeliveries(full *hooklinev1.IdempotencyRecord) []*hooklinev1.DeliveryRef {
	if len(full.GetDeliveries()) > 0 {
		return full.GetDeliveries()
	}
	out := make([]*hooklinev1.DeliveryRef, len(full.GetEndpointIds()))
	for i, ep := range full.GetEndpointIds() {
		out[i] = &hooklinev1.DeliveryRef{DeliveryId: derivedDeliveryID(full, ep), EndpointId: ep}
	}
	return out
}

// derivedDeliveryID is the id of claim c's delivery to endpoint: at the
// claim's time, from its event id and the endpoint id.
func derivedDeliveryID(c *hooklinev1.IdempotencyRecord, endpoint string) string {
	return ids.Derive(ids.Delivery, c.GetCreatedAt().AsTime(), c.GetEventId(), endpoint)
}

// idemView is the materialised idempotency topic: the current winner of
// every key. Safe for concurrent use.
type idemView struct {
	now func() time.Time
	ttl time.Duration

	mu        sync.Mutex
	winners   map[string]*claim
	lastSweep time.Time
}

func newIdemView(now func() time.Time, ttl time.Duration) *idemView {
	return &idemView{now: now, ttl: ttl, winners: map[string]*claim{}}
}

func (v *idemView) apply(r *kgo.Record) {
	var rec hooklinev1.IdempotencyRecord
	if err := hkafka.Decode(r, &rec); err != nil {
		return // not a claim: nothing to decide on
	}
	k := string(r.Key)
	v.mu.Lock()
	defer v.mu.Unlock()
	w := v.winners[k]
	switch rec.GetState() {
	case hooklinev1.IdempotencyState_IDEMPOTENCY_STATE_CLAIMED:
		if w == nil || !rec.GetCreatedAt().AsTime().Before(w.rec.GetExpiresAt().AsTime()) {
			rec.Deliveries, rec.EndpointIds = nil, nil
			v.winners[k] = &claim{rec: &rec, ref: payloadref.Of(r)}
		}
	case hooklinev1.IdempotencyState_IDEMPOTENCY_STATE_COMMITTED:
		if w != nil && w.rec.GetClaimId() == rec.GetClaimId() {
			w.committed = true
		}
	default:
	}
	// Forget winners long expired. The margin of one more TTL keeps the
	// decision independent of when each process sweeps, unless writers'
	// clocks are a whole TTL apart.
	now := v.now()
	if now.Sub(v.lastSweep) > v.ttl/8 {
		v.lastSweep = now
		for k, w := range v.winners {
			if now.After(w.rec.GetExpiresAt().AsTime().Add(v.ttl)) {
				delete(v.winners, k)
			}
		}
	}
}

// winner returns a copy of key k's winning claim, and whether there is
// one, expired or not.
func (v *idemView) winner(k string) (claim, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	w, ok := v.winners[k]
	if !ok {
		return claim{}, false
	}
	return *w, true
}

// live returns k's winning claim unless there is none or it expired at now.
func (v *idemView) live(k string, now time.Time) (claim, bool) {
	w, ok := v.winner(k)
	if !ok || !now.Before(w.rec.GetExpiresAt().AsTime()) {
		return claim{}, false
	}
	return w, true
}

// IdempotencyRecordKey is the Kafka key of tenant's idempotency key: length
// prefixed, so no tenant/key pair collides with another.
func IdempotencyRecordKey(tenant, key string) string {
	return strconv.Itoa(len(tenant)) + ":" + tenant + ":" + key
}

// RequestHash identifies what a publish asks for: the event type, the
// payload, the sorted, deduplicated endpoint ids, the ordering key
// (when set) and the metadata (when set, sorted by key; endpoints'
// content filters read it), each length-prefixed.
// Two requests with the same hash are the same request for an idempotency
// key. It is safe for concurrent use.
func RequestHash(req *hooklinev1.PublishEventRequest) []byte {
	h := sha256.New()
	write := func(b []byte) {
		_ = binary.Write(h, binary.BigEndian, uint64(len(b)))
		h.Write(b)
	}
	write([]byte(req.GetEventType()))
	write(req.GetPayload())
	named := slices.Clone(req.GetEndpointIds())
	slices.Sort(named)
	named = slices.Compact(named)
	_ = binary.Write(h, binary.BigEndian, uint64(len(named)))
	for _, id := range named {
		write([]byte(id))
	}
	if k := req.GetOrderingKey(); k != "" {
		// Only when set, so hashes of claims made before ordering keys
		// existed are unchanged.
		write([]byte(k))
	}
	if md := req.GetMetadata(); len(md) > 0 {
		// Only when set, as the ordering key; the tag keeps a request
		// with metadata apart from one whose ordering key looks alike.
		write([]byte("metadata"))
		_ = binary.Write(h, binary.BigEndian, uint64(len(md)))
		for _, k := range slices.Sorted(maps.Keys(md)) {
			write([]byte(k))
			write([]byte(md[k]))
		}
	}
	return h.Sum(nil)
}

// publishIdempotent publishes req under its idempotency key: it returns
// the key's original response when the key is live with the same
// request, refuses a different request, and otherwise claims the key and
// publishes.
func (s *Service) publishIdempotent(ctx context.Context, tenant string, req *hooklinev1.PublishEventRequest) (*hooklinev1.PublishEventResponse, error) {
	topic := s.topics.Idempotency
	k := IdempotencyRecordKey(tenant, req.GetIdempotencyKey())
	hash := RequestHash(req)
	var own *hooklinev1.IdempotencyRecord // the whole claim, when this call wrote it
	// Read every claim written before this call, by any process.
	if err := s.idemFollow.Sync(ctx, topic); err != nil {
		return nil, kafkaStatus(ctx, "idempotency key lookup", err)
	}
	if _, live := s.idem.live(k, s.now()); !live {
		c, err := s.claimKey(ctx, tenant, k, req, hash)
		if err != nil {
			return nil, err
		}
		// claimKey marked the claim in flight here, so no other call in
		// this process takes it over while we decide.
		defer s.endFlight(c.GetClaimId())
		if w, ok := s.idem.winner(k); ok && w.rec.GetClaimId() == c.GetClaimId() {
			return s.completeClaim(ctx, k, c, req)
		}
		own = c
	}
	for {
		// Taken before w is (re)read, so a commit applied after the read
		// wakes the wait below.
		changed := s.idemFollow.Changed()
		w, ok := s.idem.winner(k)
		if !ok {
			return nil, status.Error(codes.Internal, "idempotency claim disappeared")
		}
		if !sameRequest(w.rec.GetRequestHash(), hash) {
			return nil, invalid("idempotency_key", "%q was used at %s for a different request (event %s): event_type, payload, endpoint_ids, ordering_key and metadata must match the first use; use a new key for a new event",
				req.GetIdempotencyKey(), w.rec.GetCreatedAt().AsTime().UTC().Format(time.RFC3339), w.rec.GetEventId())
		}
		if w.committed {
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
		deadline := w.rec.GetCreatedAt().AsTime().Add(2*s.cfg.PublishTimeout + takeoverGrace)
		if w.rec.GetInstanceId() == s.instanceID || !s.now().Before(deadline) {
			if s.beginFlight(w.rec.GetClaimId(), true) {
				defer s.endFlight(w.rec.GetClaimId())
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
		RequestHash:    append([]byte{claimHashVersion}, hash...),
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
	s.claims.put(c)
	return c, nil
}

// completeClaim writes the deliveries of c, a whole claim record (with
// the claim's ids, so a repeat writes the same deliveries again rather
// than new ones) and then the COMMITTED record, and returns the claim's
// response. The caller holds the claim in flight.
func (s *Service) completeClaim(ctx context.Context, k string, c *hooklinev1.IdempotencyRecord, req *hooklinev1.PublishEventRequest) (*hooklinev1.PublishEventResponse, error) {
	refs := claimDeliveries(c)
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
	for _, d := range claimDeliveries(full) {
		resp.Deliveries = append(resp.Deliveries, proto.CloneOf(d))
	}
	return resp
}

// claimRecord returns the whole record of winner w: own when this call
// wrote it, else read back from the idempotency topic (at most once per
// claim while it is in the cache of recent claims).
func (s *Service) claimRecord(ctx context.Context, w claim, own *hooklinev1.IdempotencyRecord) (*hooklinev1.IdempotencyRecord, error) {
	id := w.rec.GetClaimId()
	if own.GetClaimId() == id {
		return own, nil
	}
	if full := s.claims.get(id); full != nil {
		return full, nil
	}
	opts, err := s.cfg.Kafka.Opts()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "idempotency claim: %v", err)
	}
	r, err := payloadref.Read(ctx, opts, w.ref)
	if err != nil {
		return nil, kafkaStatus(ctx, "idempotency claim not read", err)
	}
	var full hooklinev1.IdempotencyRecord
	if err := hkafka.Decode(r, &full); err != nil || full.GetClaimId() != id {
		return nil, status.Errorf(codes.Internal, "idempotency claim %s: the record at %s/%d@%d is not it (%v)", id, w.ref.GetTopic(), w.ref.GetPartition(), w.ref.GetOffset(), err)
	}
	s.claims.put(&full)
	return &full, nil
}
