package dispatcher

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/payloadref"
	"github.com/hookline/hookline/platform/telemetry"
	"github.com/hookline/hookline/sdk/sign"
	"github.com/twmb/franz-go/pkg/kgo"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
)

// testEngine is an engine with no Kafka session: records are placed by
// hand, as a poll would.
func testEngine(t testing.TB, s *Service) *engine {
	t.Helper()
	e := s.newEngine()
	lag, err := telemetry.NewLag(metricnoop.NewMeterProvider(), "test")
	if err != nil {
		t.Fatal(err)
	}
	e.lag = lag
	// An engine test's lanes view holds what the test applies to it.
	s.readLanes = func(context.Context) error { return nil }
	t.Cleanup(e.cancelWork)
	// The test is the Kafka: a record the engine popped (committed) can
	// be read back by reference, as a held delivery's payload is.
	var mu sync.Mutex
	committed := map[tp]map[int64]*kgo.Record{}
	popped := e.w.popped
	e.w.popped = func(en *entry) {
		mu.Lock()
		k := tp{en.rec.Topic, en.rec.Partition}
		if committed[k] == nil {
			committed[k] = map[int64]*kgo.Record{}
		}
		committed[k][en.rec.Offset] = en.rec
		mu.Unlock()
		popped(en)
	}
	s.holds.readRecord = func(_ context.Context, ref *hooklinev1.RecordRef) (*kgo.Record, error) {
		mu.Lock()
		defer mu.Unlock()
		if r := committed[tp{ref.GetTopic(), ref.GetPartition()}][ref.GetOffset()]; r != nil {
			return r, nil
		}
		return nil, fmt.Errorf("%w: %v not committed", payloadref.ErrGone, ref)
	}
	return e
}

// pollN places n deliveries for ep_1 on partition p at offsets from...,
// as a poll would.
func (e *engine) pollN(t *testing.T, p int32, from int64, n int) {
	t.Helper()
	for i := range n {
		e.pollID(t, p, from+int64(i), fmt.Sprint("dlv_", from+int64(i)))
	}
}

// pollID places delivery id for ep_1 at partition p, offset.
func (e *engine) pollID(t *testing.T, p int32, offset int64, id string) {
	t.Helper()
	now := e.s.now()
	d := &hooklinev1.Delivery{DeliveryId: id, EventId: "evt", TenantId: "t", EndpointId: "ep_1", EventType: "a.b", Payload: []byte(`{}`), Attempt: 1}
	r, err := hkafka.Record(e.s.topics.Deliveries, "ep_1", d)
	if err != nil {
		t.Fatal(err)
	}
	r.Partition, r.Offset = p, offset
	if en := e.w.add(r, now, e.work); en != nil {
		e.placeRead(t, en, now)
	}
}

// placeRead places en as a poll would and, while its partition's lanes
// are not read yet, takes the inbox until they are (resolve.go), as the
// loop would before working on the partition.
func (e *engine) placeRead(t testing.TB, en *entry, now time.Time) {
	t.Helper()
	e.place(en, now)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for !en.part.res.lanesRead && !en.part.dropped {
		select {
		case <-e.in.signal:
		case <-ctx.Done():
			t.Fatal("the partition's lanes were not read")
		}
		if err := e.collect(e.s.now()); err != nil {
			t.Fatal(err)
		}
	}
}

// waitMsgs collects the inbox until n goroutines have reported or the
// test's deadline passes.
func (e *engine) waitOutstanding(t testing.TB, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for e.outstanding > n {
		select {
		case <-e.in.signal:
		case <-ctx.Done():
			t.Fatalf("%d goroutines still out, want %d", e.outstanding, n)
		}
		if err := e.collect(e.s.now()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRevokedPartitionDropsItsWaitingDeliveriesAndCancelsItsAttempts: on
// revocation the partition's waiting deliveries leave their lane at once
// and its attempts in flight are cancelled, their outputs discarded and
// their cap slots given back.
func TestRevokedPartitionDropsItsWaitingDeliveriesAndCancelsItsAttempts(t *testing.T) {
	arrived := make(chan struct{}, 16)
	cancelled := make(chan struct{}, 16)
	rx := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		// Read the body: only then does the server notice the client
		// going away.
		_, _ = io.Copy(io.Discard, r.Body)
		arrived <- struct{}{}
		<-r.Context().Done() // hangs until the dispatcher gives up on it
		cancelled <- struct{}{}
	}))
	defer rx.Close()
	s := newTestService(t)
	ep := endpoint(rx.URL, sign.GenerateSecret())
	ep.Endpoint.MaxInFlight = 2
	s.store.Put(ep)
	e := testEngine(t, s)

	e.pollN(t, 0, 0, 10)
	e.pump(s.now())
	l := e.f.lanes["ep_1"]
	if l.inFlight != 2 || l.queued != 8 {
		t.Fatalf("in flight %d, waiting %d; want the cap (2) in flight and 8 waiting", l.inFlight, l.queued)
	}
	for range 2 {
		<-arrived
	}

	e.dropped(map[string][]int32{s.topics.Deliveries: {0}})
	for range 2 {
		select {
		case <-cancelled:
		case <-time.After(5 * time.Second):
			t.Fatal("an attempt of the revoked partition was not cancelled")
		}
	}
	e.sweep(s.now())
	if l.queued != 0 {
		t.Fatalf("%d deliveries still wait for a revoked partition", l.queued)
	}
	e.waitOutstanding(t, 0)
	if l.inFlight != 0 || e.f.used != 0 {
		t.Fatalf("after the cancelled attempts reported: %d in flight, %d bytes of attempt memory used", l.inFlight, e.f.used)
	}
	if e.w.records != 0 || e.w.bytes != 0 || len(e.w.parts) != 0 {
		t.Fatalf("window still holds %d records (%d bytes) in %d partitions", e.w.records, e.w.bytes, len(e.w.parts))
	}
	if e.w.done != 0 {
		t.Fatalf("%d outputs of a revoked partition kept for commit", e.w.done)
	}
}

// TestWatermarkStopsAtTheOldestUnfinishedDelivery: outputs of deliveries
// finished above one still waiting are kept, not committed, and the
// commit offset is the waiting one's.
func TestWatermarkStopsAtTheOldestUnfinishedDelivery(t *testing.T) {
	w := newWindow(100, 1<<20)
	now := time.Now()
	var es []*entry
	for i := range 5 {
		es = append(es, w.add(&kgo.Record{Topic: "d", Partition: 0, Offset: int64(10 + i), Value: []byte("x")}, now, context.Background()))
	}
	out := []*kgo.Record{{Topic: "results"}}
	w.finish(es[0], out)
	w.finish(es[1], out)
	w.finish(es[3], out)
	pw := es[0].part
	outs, mark, moved := w.popDone(pw, now, nil)
	if len(outs) != 2 || mark != 12 || !moved {
		t.Fatalf("popped %d outputs, watermark %d (moved %v); want 2 and 12", len(outs), mark, moved)
	}
	outs, mark, moved = w.popDone(pw, now, nil)
	if len(outs) != 0 || mark != 12 || moved {
		t.Fatalf("second pop: %d outputs, watermark %d (moved %v); want nothing, 12", len(outs), mark, moved)
	}
	w.finish(es[2], out)
	w.finish(es[4], out)
	if outs, mark, _ = w.popDone(pw, now, nil); len(outs) != 3 || mark != 15 {
		t.Fatalf("after the head finished: %d outputs, watermark %d; want 3, 15", len(outs), mark)
	}
	if w.records != 0 {
		t.Fatalf("window holds %d records after all were committed", w.records)
	}
	// A record polled again (the fetch position did not move back) is
	// not a second entry.
	if w.add(&kgo.Record{Topic: "d", Partition: 0, Offset: 13}, now, context.Background()) != nil {
		t.Fatal("a record below the partition's next offset was added again")
	}
}

// TestACopyOfADeliveryIsSkippedButARefetchIsNot: a delivery record
// written twice (a publish retried with its idempotency key after its
// answer was lost) is attempted once, with one result; the same record
// fetched again after a rewind is attempted again; a delivery put back
// after a worker fault is not a copy. (A refetch is settled again, from
// its receiver's answer when it had one: answered.go.)
func TestACopyOfADeliveryIsSkippedButARefetchIsNot(t *testing.T) {
	s := newTestService(t)
	requests := countingEndpoint(t, s)
	e := testEngine(t, s)

	e.pollID(t, 0, 0, "dlv_a")  // the delivery
	e.pollID(t, 0, 10, "dlv_a") // its copy, ten records later
	e.pump(s.now())
	e.waitOutstanding(t, 0)
	pw := e.w.parts[tp{s.topics.Deliveries, 0}]
	outs, mark, _ := e.w.popDone(pw, s.now(), nil)
	if n := requests.Load(); n != 1 || len(outs) != 1 || mark != 11 {
		t.Fatalf("receiver got %d requests, %d records written, watermark %d; want 1, 1 result, 11", n, len(outs), mark)
	}

	// The partition rewound (an aborted commit): the same offset again.
	e.dropped(map[string][]int32{s.topics.Deliveries: {0}})
	e.sweep(s.now())
	e.pollID(t, 0, 0, "dlv_a")
	e.pump(s.now())
	e.waitOutstanding(t, 0)
	pw = e.w.parts[tp{s.topics.Deliveries, 0}]
	outs, _, _ = e.w.popDone(pw, s.now(), nil)
	if len(outs) != 1 {
		t.Fatalf("a record fetched again after a rewind wrote %d records; want its result again", len(outs))
	}
	// Its receiver had answered 2xx and the settlement never committed:
	// it settles from that answer (answered.go), with no second request.
	if n := requests.Load(); n != 1 {
		t.Fatalf("a record fetched again after a rewind was POSTed again (%d requests) though its receiver had answered", n)
	}
}

// countingEndpoint puts endpoint ep_1 of tenant t in s's store, at a
// receiver that answers 204 to everything, and returns its count of
// requests.
func countingEndpoint(t *testing.T, s *Service) *atomic.Int32 {
	t.Helper()
	url, requests := countingReceiver(t, http.StatusNoContent)
	s.store.Put(endpoint(url, sign.GenerateSecret()))
	return requests
}

// countingReceiver is a receiver answering status to every request,
// and the count of requests it got.
func countingReceiver(t *testing.T, status int) (string, *atomic.Int32) {
	t.Helper()
	var requests atomic.Int32
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		w.WriteHeader(status)
	}))
	t.Cleanup(rx.Close)
	return rx.URL, &requests
}
