package idempotency

import (
	"context"
	"fmt"
	"log/slog"
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

// takeoverGrace is added to the publish timeout before another process
// completes a claim whose writer has not committed it.
const takeoverGrace = 5 * time.Second

// minWait is the shortest wait for a claim's commit before looking again.
const minWait = 100 * time.Millisecond

// Deps is what a Publisher uses, and all it uses: the idempotency view
// and its follower, the settings a claim is written with, and from the
// ingest that owns it the functions for the rest of a publish (its
// targets, its Delivery records, the producer, and what a failed Kafka
// call answers).
type Deps struct {
	// View is the idempotency topic's winners, fed by Follower.
	View     *View
	Follower *hkafka.Follower
	// Topic is the idempotency topic.
	Topic string
	// PublishTimeout (--publish-timeout) bounds each write of a publish;
	// a claim may be taken over 2 × PublishTimeout + 5 s after it was
	// made.
	PublishTimeout time.Duration
	// TTL (--idempotency-ttl) is how long a claim stays live.
	TTL time.Duration
	// InstanceID names this process in the claims it writes.
	InstanceID string
	Now        func() time.Time
	Log        *slog.Logger
	// Targets returns the endpoints req goes to, which a claim records.
	Targets func(ctx context.Context, tenant string, req *hooklinev1.PublishEventRequest) ([]*hooklinev1.EndpointRecord, error)
	// Deliver publishes req now: it writes the Delivery records of full,
	// a whole claim record, with the claim's ids. Its error is the
	// caller's status.
	Deliver func(ctx context.Context, full *hooklinev1.IdempotencyRecord, req *hooklinev1.PublishEventRequest) error
	// Produce writes rs and returns once all in-sync replicas have
	// acknowledged them, within PublishTimeout.
	Produce func(ctx context.Context, rs ...*kgo.Record) error
	// KafkaOpts are the client options to read a claim back with.
	KafkaOpts func() ([]kgo.Opt, error)
	// KafkaStatus maps a failed Kafka call, made for what, to the
	// caller's status.
	KafkaStatus func(ctx context.Context, what string, err error) error
}

// Publisher publishes requests under their idempotency keys, by the
// claims the package doc describes. Safe for concurrent use.
type Publisher struct {
	deps Deps
	// claims keeps the whole records of recent idempotency claims.
	claims Cache
	// flight counts, per claim id, the completions running here.
	flightMu sync.Mutex
	flight   map[string]int
}

// NewPublisher returns a Publisher that uses deps.
func NewPublisher(deps Deps) *Publisher {
	return &Publisher{deps: deps, flight: map[string]int{}}
}

// Publish publishes req under its idempotency key: it returns the key's
// original response when the key is live with the same request, refuses
// a different request, and otherwise claims the key and publishes.
func (p *Publisher) Publish(ctx context.Context, tenant string, req *hooklinev1.PublishEventRequest) (*hooklinev1.PublishEventResponse, error) {
	topic := p.deps.Topic
	k := RecordKey(tenant, req.GetIdempotencyKey())
	hash := RequestHash(req)
	var own *hooklinev1.IdempotencyRecord // the whole claim, when this call wrote it
	// Read every claim written before this call, by any process.
	if err := p.deps.Follower.Sync(ctx, topic); err != nil {
		return nil, p.deps.KafkaStatus(ctx, "idempotency key lookup", err)
	}
	if _, live := p.deps.View.Live(k, p.deps.Now()); !live {
		c, err := p.claimKey(ctx, tenant, k, req, hash)
		if err != nil {
			return nil, err
		}
		// claimKey marked the claim in flight here, so no other call in
		// this process takes it over while we decide.
		defer p.endFlight(c.GetClaimId())
		if w, ok := p.deps.View.Winner(k); ok && w.Rec.GetClaimId() == c.GetClaimId() {
			return p.completeClaim(ctx, k, c, req)
		}
		own = c
	}
	for {
		// Taken before w is (re)read, so a commit applied after the read
		// wakes the wait below.
		changed := p.deps.Follower.Changed()
		w, ok := p.deps.View.Winner(k)
		if !ok {
			return nil, status.Error(codes.Internal, "idempotency claim disappeared")
		}
		if !SameRequest(w.Rec.GetRequestHash(), hash) {
			return nil, status.Errorf(codes.InvalidArgument, "idempotency_key: %q was used at %s for a different request (event %s): event_type, payload, endpoint_ids, ordering_key and metadata must match the first use; use a new key for a new event",
				req.GetIdempotencyKey(), w.Rec.GetCreatedAt().AsTime().UTC().Format(time.RFC3339), w.Rec.GetEventId())
		}
		if w.Committed {
			full, err := p.claimRecord(ctx, w, own)
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
		deadline := w.Rec.GetCreatedAt().AsTime().Add(2*p.deps.PublishTimeout + takeoverGrace)
		if w.Rec.GetInstanceId() == p.deps.InstanceID || !p.deps.Now().Before(deadline) {
			if p.beginFlight(w.Rec.GetClaimId(), true) {
				defer p.endFlight(w.Rec.GetClaimId())
				full, err := p.claimRecord(ctx, w, own)
				if err != nil {
					return nil, err
				}
				return p.completeClaim(ctx, k, full, req)
			}
		}
		// Another writer is publishing: wait for its commit, bounded. (A
		// call in this process working on the claim wakes us by writing
		// the commit; minWait only bounds the loop if it fails.)
		wait := time.NewTimer(max(deadline.Sub(p.deps.Now()), minWait))
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
func (p *Publisher) claimKey(ctx context.Context, tenant, k string, req *hooklinev1.PublishEventRequest, hash []byte) (*hooklinev1.IdempotencyRecord, error) {
	targets, err := p.deps.Targets(ctx, tenant, req)
	if err != nil {
		return nil, err
	}
	now := p.deps.Now()
	c := &hooklinev1.IdempotencyRecord{
		TenantId:       tenant,
		IdempotencyKey: req.GetIdempotencyKey(),
		ClaimId:        ids.New("clm_", now),
		State:          hooklinev1.IdempotencyState_IDEMPOTENCY_STATE_CLAIMED,
		RequestHash:    append([]byte{HashVersion}, hash...),
		EventId:        ids.New(ids.Event, now),
		InstanceId:     p.deps.InstanceID,
		CreatedAt:      timestamppb.New(now),
		ExpiresAt:      timestamppb.New(now.Add(p.deps.TTL)),
	}
	for _, ep := range targets {
		c.EndpointIds = append(c.EndpointIds, ep.GetEndpoint().GetId())
	}
	r, err := hkafka.Record(p.deps.Topic, k, c)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encode claim: %v", err)
	}
	p.beginFlight(c.GetClaimId(), false)
	ok := false
	defer func() {
		if !ok {
			p.endFlight(c.GetClaimId())
		}
	}()
	pctx, cancel := context.WithTimeout(ctx, p.deps.PublishTimeout)
	defer cancel()
	if err := p.deps.Produce(pctx, r); err != nil {
		return nil, p.deps.KafkaStatus(ctx, "event not accepted", err)
	}
	if err := p.deps.Follower.WaitPast(pctx, r.Topic, r.Partition, r.Offset); err != nil {
		return nil, p.deps.KafkaStatus(ctx, "idempotency claim not read back", err)
	}
	ok = true
	p.claims.Put(c)
	return c, nil
}

// completeClaim writes the deliveries of c, a whole claim record (with
// the claim's ids, so a repeat writes the same deliveries again rather
// than new ones) and then the COMMITTED record, and returns the claim's
// response. The caller holds the claim in flight.
func (p *Publisher) completeClaim(ctx context.Context, k string, c *hooklinev1.IdempotencyRecord, req *hooklinev1.PublishEventRequest) (*hooklinev1.PublishEventResponse, error) {
	if err := p.deps.Deliver(ctx, c, req); err != nil {
		return nil, err
	}
	// The commit names the claim; what it fans out to stays in the claim.
	commit := proto.CloneOf(c)
	commit.Deliveries, commit.EndpointIds = nil, nil
	commit.State = hooklinev1.IdempotencyState_IDEMPOTENCY_STATE_COMMITTED
	commit.InstanceId = p.deps.InstanceID
	// The deliveries are durable: record that even if the caller has
	// gone, or its retry would write them again; but within the publish's
	// bound (ingest's publishEvent), so the answer is not late.
	cctx, cancel := context.WithoutCancel(ctx), context.CancelFunc(func() {})
	if d, ok := ctx.Deadline(); ok {
		cctx, cancel = context.WithDeadline(cctx, d)
	}
	defer cancel()
	r, err := hkafka.Record(p.deps.Topic, k, commit)
	if err == nil {
		err = p.deps.Produce(cctx, r)
	}
	if err == nil {
		// Hold the claim in flight until this process's view has the
		// commit, so no other call here mistakes the claim for abandoned.
		err = p.deps.Follower.WaitPast(cctx, r.Topic, r.Partition, r.Offset)
	}
	if err != nil {
		// The deliveries are durable, so the answer is right. A retry
		// will find the claim uncommitted and write the same deliveries
		// again (same ids: receivers deduplicate on webhook-id).
		p.deps.Log.WarnContext(ctx, "idempotency commit not written", "claim_id", c.GetClaimId(), "err", fmt.Sprint(err))
	}
	return claimResponse(c), nil
}

// beginFlight marks claimID as being worked on by a call in this process.
// With onlyIfIdle it does so only when no other call is, and reports
// whether it did.
func (p *Publisher) beginFlight(claimID string, onlyIfIdle bool) bool {
	p.flightMu.Lock()
	defer p.flightMu.Unlock()
	if onlyIfIdle && p.flight[claimID] > 0 {
		return false
	}
	p.flight[claimID]++
	return true
}

func (p *Publisher) endFlight(claimID string) {
	p.flightMu.Lock()
	defer p.flightMu.Unlock()
	if p.flight[claimID]--; p.flight[claimID] <= 0 {
		delete(p.flight, claimID)
	}
}

// claimResponse is the response of full, a whole claim record: the same
// for the call that claimed and for every repeat, in every process.
func claimResponse(full *hooklinev1.IdempotencyRecord) *hooklinev1.PublishEventResponse {
	resp := &hooklinev1.PublishEventResponse{EventId: full.GetEventId()}
	for _, d := range Deliveries(full) {
		resp.Deliveries = append(resp.Deliveries, proto.CloneOf(d))
	}
	return resp
}

// claimRecord returns the whole record of winner w: own when this call
// wrote it, else read back from the idempotency topic (at most once per
// claim while it is in the cache of recent claims).
func (p *Publisher) claimRecord(ctx context.Context, w Claim, own *hooklinev1.IdempotencyRecord) (*hooklinev1.IdempotencyRecord, error) {
	id := w.Rec.GetClaimId()
	if own.GetClaimId() == id {
		return own, nil
	}
	if full := p.claims.Get(id); full != nil {
		return full, nil
	}
	opts, err := p.deps.KafkaOpts()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "idempotency claim: %v", err)
	}
	r, err := payloadref.Read(ctx, opts, w.Ref)
	if err != nil {
		return nil, p.deps.KafkaStatus(ctx, "idempotency claim not read", err)
	}
	var full hooklinev1.IdempotencyRecord
	if err := hkafka.Decode(r, &full); err != nil || full.GetClaimId() != id {
		return nil, status.Errorf(codes.Internal, "idempotency claim %s: the record at %s/%d@%d is not it (%v)", id, w.Ref.GetTopic(), w.Ref.GetPartition(), w.Ref.GetOffset(), err)
	}
	p.claims.Put(&full)
	return &full, nil
}
