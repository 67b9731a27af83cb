package e2e

import (
	"bytes"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/kafkatest"
	"github.com/hookline/hookline/services/ingest/idempotency"
	"github.com/hookline/hookline/services/ingest/ingest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// otherTenantKey authenticates tenant "other" on replicas started by
// startReplica.
const otherTenantKey = "other-replica-key-5b0e8f2d7c41a9e6d3b8f0c2a7e4d1b9"

// offsetClock is a clock a test moves forward: real time plus an offset.
type offsetClock struct{ offset atomic.Int64 }

func (c *offsetClock) now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

func (c *offsetClock) advance(d time.Duration) { c.offset.Add(int64(d)) }

// startReplica starts one more ingest process on st's Kafka and returns
// a connection to it once it serves. It stops when the test ends.
func (st *stack) startReplica(opts ...ingest.Option) *grpc.ClientConn {
	st.t.Helper()
	return st.startReplicaWith(func(*ingest.Config) {}, opts...)
}

// startReplicaWith is startReplica with configure applied to the
// replica's configuration.
func (st *stack) startReplicaWith(configure func(*ingest.Config), opts ...ingest.Option) *grpc.ClientConn {
	st.t.Helper()
	ic := defaults[ingest.Config](st.t)
	ic.Kafka = st.kafka
	ic.APIKeys = []string{testTenant + ":" + st.apiKey, "other:" + otherTenantKey}
	ic.AllowHTTP, ic.AllowPrivate = true, true
	configure(&ic)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		st.t.Fatal(err)
	}
	in, err := ingest.New(ic, append([]ingest.Option{ingest.WithListener(ln), ingest.WithLogger(testLogger(st.t, "ingest-replica"))}, opts...)...)
	if err != nil {
		st.t.Fatal(err)
	}
	var svc vservice
	svc.start(st, in.Run)
	st.t.Cleanup(svc.halt)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		st.t.Fatal(err)
	}
	st.t.Cleanup(func() { conn.Close() })
	st.waitServingOn(conn)
	return conn
}

func TestIdempotencyKeyAcrossTwoReplicasDeliversOnceRejectsConflictsAndExpires(t *testing.T) {
	st := startStack(t)
	rx := newReceiver(t, http.StatusOK)
	st.createEndpoint(rx.URL)
	clock := &offsetClock{}
	replica := st.startReplica(ingest.WithClock(clock.now))
	apis := []hooklinev1.EventServiceClient{st.events(), hooklinev1.NewEventServiceClient(replica)}

	req := &hooklinev1.PublishEventRequest{EventType: "invoice.paid", Payload: []byte(`{"invoice":"in_1"}`), IdempotencyKey: "order-1"}
	const n = 8
	resps := make([]*hooklinev1.PublishEventResponse, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			resps[i], errs[i] = apis[i%2].PublishEvent(st.ctx(), req)
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("publish %d: %v", i, errs[i])
		}
		if !proto.Equal(resps[i], resps[0]) {
			t.Fatalf("publish %d answered %v, publish 0 answered %v: want the same event and deliveries", i, resps[i], resps[0])
		}
	}
	if len(resps[0].GetDeliveries()) != 1 {
		t.Fatalf("want one delivery, got %v", resps[0].GetDeliveries())
	}
	// Every call returned after the winner's deliveries were durable, so
	// the deliveries topic already holds all there will be.
	if got := st.endOffsets(st.topics.Deliveries); got != 1 {
		t.Fatalf("%d concurrent publishes with one key wrote %d deliveries, want 1", n, got)
	}
	st.readN(st.topics.Results, 1)
	if posts := rx.got(); len(posts) != 1 || posts[0].header.Get("webhook-id") != resps[0].GetEventId() {
		t.Fatalf("receiver got %d POSTs, want exactly one for %s", len(posts), resps[0].GetEventId())
	}

	// A replica started now rebuilds the key from Kafka.
	late := hooklinev1.NewEventServiceClient(st.startReplica())
	again, err := late.PublishEvent(st.ctx(), req)
	if err != nil || !proto.Equal(again, resps[0]) {
		t.Fatalf("a fresh replica answered %v, %v; want the original %v", again, err, resps[0])
	}
	// Byte for byte, whichever replica answered and however it got the
	// claim (its own, or read back from the topic), and naming the
	// delivery that was written.
	first, err := proto.MarshalOptions{Deterministic: true}.Marshal(resps[0])
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range append(resps, again) {
		if b, _ := (proto.MarshalOptions{Deterministic: true}).Marshal(r); !bytes.Equal(b, first) {
			t.Fatalf("answer %d is not byte-identical to the first: %x, want %x", i, b, first)
		}
	}
	if d := kafkatest.Decode(t, st.readN(st.topics.Deliveries, 1), func() *hooklinev1.Delivery { return &hooklinev1.Delivery{} })[0]; d.GetDeliveryId() != resps[0].GetDeliveries()[0].GetDeliveryId() {
		t.Fatalf("the delivery written is %s, the answer names %s", d.GetDeliveryId(), resps[0].GetDeliveries()[0].GetDeliveryId())
	}

	conflict := proto.Clone(req).(*hooklinev1.PublishEventRequest)
	conflict.Payload = []byte(`{"invoice":"in_2"}`)
	for i, api := range apis {
		_, err := api.PublishEvent(st.ctx(), conflict)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "idempotency_key") || !strings.Contains(err.Error(), resps[0].GetEventId()) {
			t.Fatalf("replica %d: same key, different payload: want InvalidArgument naming the key and the first event, got %v", i, err)
		}
	}

	// Keys are per tenant: another tenant's "order-1" is its own event.
	other := st.ctxAs(otherTenantKey)
	theirs, err := apis[1].PublishEvent(other, conflict)
	if err != nil || theirs.GetEventId() == resps[0].GetEventId() {
		t.Fatalf("another tenant's use of the key: %v, %v; want a new event", theirs, err)
	}

	// After the TTL the key is free: the different payload is a new event.
	clock.advance(24*time.Hour + time.Minute)
	fresh, err := apis[1].PublishEvent(st.ctx(), conflict)
	if err != nil {
		t.Fatalf("after the TTL: %v", err)
	}
	if fresh.GetEventId() == resps[0].GetEventId() {
		t.Fatalf("after the TTL the key still answers with event %s", fresh.GetEventId())
	}
	if got := st.endOffsets(st.topics.Deliveries); got != 2 {
		t.Fatalf("deliveries written: %d, want 2 (the first event and the one after expiry)", got)
	}
}

// A claim whose writer died before writing the deliveries: a retry with
// the same key and request completes it with the claim's ids, rather
// than answering with deliveries that were never written.
func TestIdempotencyRetryCompletesAClaimWhoseWriterDied(t *testing.T) {
	st := startStack(t)
	rx := newReceiver(t, http.StatusOK)
	ep := st.createEndpoint(rx.URL)
	req := &hooklinev1.PublishEventRequest{EventType: "invoice.paid", Payload: []byte(`{"n":1}`), IdempotencyKey: "k-crash"}
	created := time.Now().Add(-time.Minute) // older than the publish timeout and the grace
	orphan := &hooklinev1.IdempotencyRecord{
		TenantId:       testTenant,
		IdempotencyKey: req.GetIdempotencyKey(),
		ClaimId:        "clm_orphan",
		State:          hooklinev1.IdempotencyState_IDEMPOTENCY_STATE_CLAIMED,
		RequestHash:    idempotency.RequestHash(req),
		EventId:        "evt_00000000000000000000000000",
		Deliveries:     []*hooklinev1.DeliveryRef{{DeliveryId: "dlv_00000000000000000000000000", EndpointId: ep.GetEndpoint().GetId()}},
		InstanceId:     "ing_gone",
		CreatedAt:      timestamppb.New(created),
		ExpiresAt:      timestamppb.New(created.Add(24 * time.Hour)),
	}
	r, err := hkafka.Record(st.topics.Idempotency, idempotency.RecordKey(testTenant, req.GetIdempotencyKey()), orphan)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.client.ProduceSync(t.Context(), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if n := st.endOffsets(st.topics.Deliveries); n != 0 {
		t.Fatalf("deliveries before the retry: %d", n)
	}

	resp, err := st.events().PublishEvent(st.ctx(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetEventId() != orphan.GetEventId() || len(resp.GetDeliveries()) != 1 || resp.GetDeliveries()[0].GetDeliveryId() != "dlv_00000000000000000000000000" {
		t.Fatalf("retry answered %v; want the claim's event and delivery", resp)
	}
	d := kafkatest.Decode(t, st.readN(st.topics.Deliveries, 1), func() *hooklinev1.Delivery { return &hooklinev1.Delivery{} })[0]
	if d.GetDeliveryId() != "dlv_00000000000000000000000000" || d.GetEventId() != orphan.GetEventId() || string(d.GetPayload()) != `{"n":1}` {
		t.Fatalf("completed delivery %v does not carry the claim's ids and the payload", d)
	}
	// Committed now: one more retry writes nothing.
	if _, err := st.events().PublishEvent(st.ctx(), req); err != nil {
		t.Fatal(err)
	}
	if n := st.endOffsets(st.topics.Deliveries); n != 1 {
		t.Fatalf("deliveries after a committed retry: %d, want 1", n)
	}
	st.readN(st.topics.Results, 1)
	if posts := rx.got(); len(posts) != 1 || posts[0].header.Get("webhook-id") != orphan.GetEventId() {
		t.Fatalf("receiver got %d POSTs, want one for %s", len(posts), orphan.GetEventId())
	}
}
