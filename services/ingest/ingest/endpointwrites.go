package ingest

// Endpoint writes: conditional records of the endpoints topic, read
// back by this replica's view before a call answers.

import (
	"context"
	"errors"
	"strconv"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/endpoints"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/sdk/ids"
	"github.com/hookline/hookline/services/ingest/apikey"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// endpointWriter writes endpoint records: conditional records of the
// endpoints topic, each read back by this replica's view (store) before
// the call answers, and changes of one endpoint serialised in this
// process (locks). It holds the endpoints view, the producer, the
// endpoints topic, --publish-timeout, the locks and the clock; nothing
// else.
type endpointWriter struct {
	store *endpoints.Store
	kafka *kafkaProducer
	// topic is the endpoints topic.
	topic string
	// publishTimeout is --publish-timeout.
	publishTimeout time.Duration
	// locks serialise endpoint read-modify-write cycles in this replica,
	// per endpoint (and per tenant for creates); across replicas the
	// conditional writes decide.
	locks keyedMutex
	now   func() time.Time
}

// writeEndpoint writes rec (nil: a tombstone) as endpoint id's next
// record and waits until this replica's view has read it, so the caller
// reads its own write. The write is conditional, decided in log order
// (platform/endpoints): endpoints.ErrLost means a concurrent change came
// first and rec was ignored everywhere. Any other error is a gRPC status.
func (w *endpointWriter) writeEndpoint(ctx context.Context, id string, rec *hooklinev1.EndpointRecord) error {
	r := &kgo.Record{Topic: w.topic, Key: []byte(id)}
	if rec != nil {
		var err error
		if r, err = hkafka.Record(w.topic, id, rec); err != nil {
			return status.Errorf(codes.Internal, "encode endpoint: %v", err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, w.publishTimeout)
	defer cancel()
	err := w.store.Write(wctx, r, func(ctx context.Context, r *kgo.Record) error { return w.kafka.produce(ctx, r) })
	switch {
	case err == nil, errors.Is(err, endpoints.ErrLost):
		return err
	case errors.Is(err, endpoints.ErrUnconfirmed),
		errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		// Written or perhaps still being written, not read back in time:
		// it may or may not apply.
		return status.Errorf(codes.Unavailable, "endpoint change not confirmed within %v (%v); it may still apply: read the endpoint before retrying", w.publishTimeout, err)
	}
	return kafkaStatus(ctx, "endpoint not saved", err)
}

// Etag returns the etag of an endpoint record: it names the record's
// version, which every change bumps. Safe for concurrent use.
func Etag(rec *hooklinev1.EndpointRecord) string {
	return "v" + strconv.FormatUint(rec.GetVersion(), 10)
}

// withEtag returns a copy of rec's endpoint with its etag, for answers.
func withEtag(rec *hooklinev1.EndpointRecord) *hooklinev1.Endpoint {
	ep := proto.Clone(rec.GetEndpoint()).(*hooklinev1.Endpoint)
	ep.Etag = Etag(rec)
	return ep
}

// owned returns the caller's endpoint id, or NotFound: another tenant's
// endpoint is indistinguishable from a missing one.
func (w *endpointWriter) owned(ctx context.Context, id string) (*hooklinev1.EndpointRecord, error) {
	if id == "" {
		return nil, invalid("id", "is required")
	}
	rec := w.store.Get(id)
	if rec == nil && ids.Valid(ids.Endpoint, id) {
		// Perhaps written a moment ago through another replica.
		if err := w.store.Sync(ctx); err != nil {
			return nil, kafkaStatus(ctx, "endpoint lookup", err)
		}
		rec = w.store.Get(id)
	}
	if rec == nil || rec.GetEndpoint().GetTenantId() != apikey.TenantFrom(ctx) {
		return nil, status.Errorf(codes.NotFound, "endpoint %q not found", id)
	}
	return rec, nil
}

// readBarrier makes a read see every endpoint change committed before the
// call began, through any replica (the rounds are shared with publishes).
func (w *endpointWriter) readBarrier(ctx context.Context) error {
	if err := w.store.Barrier(ctx); err != nil {
		return kafkaStatus(ctx, "endpoints not read", err)
	}
	return nil
}

// change applies fn to a copy of the caller's endpoint id and writes it
// as the next version. The write is conditional (decided in log order
// against every other writer, in any process): if a concurrent change
// came first, change re-reads the endpoint and applies fn again, at most
// maxWriteAttempts times. With an etag, the change applies only to the
// state the etag names, and is ABORTED otherwise. Changes of one
// endpoint are serialised in this process; other endpoints' changes do
// not wait for them. fn must do no network I/O.
func (w *endpointWriter) change(ctx context.Context, id, etag string, fn func(*hooklinev1.EndpointRecord) error) (*hooklinev1.EndpointRecord, error) {
	if id == "" {
		return nil, invalid("id", "is required")
	}
	unlock, err := w.locks.lock(ctx, "endpoint:"+id)
	if err != nil {
		return nil, status.FromContextError(err).Err()
	}
	defer unlock()
	for attempt := 1; ; attempt++ {
		cur, err := w.owned(ctx, id)
		if err != nil {
			return nil, err
		}
		if etag != "" && etag != Etag(cur) {
			return nil, status.Errorf(codes.Aborted, "endpoint %s changed since etag %q was read (now %q); re-read it with GetEndpoint and apply your change again", id, etag, Etag(cur))
		}
		rec := proto.Clone(cur).(*hooklinev1.EndpointRecord)
		if err := fn(rec); err != nil {
			return nil, err
		}
		rec.Version = cur.GetVersion() + 1
		rec.Endpoint.UpdatedAt = timestamppb.New(w.now())
		err = w.writeEndpoint(ctx, id, rec)
		switch {
		case err == nil:
			return rec, nil
		case !errors.Is(err, endpoints.ErrLost):
			return nil, err
		case etag != "":
			return nil, status.Errorf(codes.Aborted, "endpoint %s was changed concurrently since etag %q was read; re-read it with GetEndpoint and apply your change again", id, etag)
		case attempt == maxWriteAttempts:
			return nil, status.Errorf(codes.Aborted, "endpoint %s: %d concurrent changes came first; re-read it and retry", id, attempt)
		}
		// The view has read past our record, so it holds what won.
	}
}
