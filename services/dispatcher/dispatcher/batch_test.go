package dispatcher

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/sdk/batch"
	"github.com/hookline/hookline/sdk/sign"
	"github.com/hookline/hookline/services/dispatcher/health"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// batchRequest is one request a batching receiver got.
type batchRequest struct {
	id, timestamp, signature, size string
	body                           []byte
}

// batchReceiver puts a batching ep_1 (maxEvents, maxWait) in s's store at
// a receiver that answers statuses in turn (the last one for ever) and
// records every request.
func batchReceiver(t *testing.T, s *Service, maxEvents uint32, maxWait time.Duration, statuses ...int) (string, func() []batchRequest) {
	t.Helper()
	var mu sync.Mutex
	var got []batchRequest
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, batchRequest{r.Header.Get(sign.HeaderID), r.Header.Get(sign.HeaderTimestamp), r.Header.Get(sign.HeaderSignature), r.Header.Get(batch.HeaderSize), body})
		status := statuses[min(len(got), len(statuses))-1]
		mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(rx.Close)
	secret := sign.GenerateSecret()
	ep := endpoint(rx.URL, secret)
	ep.Endpoint.Batch = &hooklinev1.BatchSettings{MaxEvents: maxEvents, MaxWait: durationpb.New(maxWait)}
	s.store.Put(ep)
	return secret, func() []batchRequest {
		mu.Lock()
		defer mu.Unlock()
		return append([]batchRequest(nil), got...)
	}
}

// pollEvents places n deliveries of ep_1 at partition 0 from offset from,
// each its own event with a payload naming it.
func (e *engine) pollEvents(t *testing.T, from int64, n int) {
	t.Helper()
	now := e.s.now()
	for i := range n {
		off := from + int64(i)
		d := &hooklinev1.Delivery{DeliveryId: fmt.Sprint("dlv_", off), EventId: fmt.Sprint("evt_", off), TenantId: "t", EndpointId: "ep_1",
			EventType: "a.b", Payload: fmt.Appendf(nil, `{"n":%d}`, off), Attempt: 1, CreatedAt: timestamppb.New(now)}
		e.placeDelivery(t, d, off, now)
	}
}

// placeDelivery places d at partition 0, offset off, as a poll would.
func (e *engine) placeDelivery(t *testing.T, d *hooklinev1.Delivery, off int64, now time.Time) {
	t.Helper()
	r, err := hkafka.Record(e.s.topics.Deliveries, "ep_1", d)
	if err != nil {
		t.Fatal(err)
	}
	r.Partition, r.Offset = 0, off
	if en := e.w.add(r, now, e.work); en != nil {
		e.placeRead(t, en, now)
	}
}

// run starts what may start at now and waits for every attempt.
func (e *engine) run(t *testing.T, now time.Time) {
	t.Helper()
	e.f.wake(now)
	e.pump(now)
	e.waitOutstanding(t, 0)
}

// popped returns what the next commit of partition 0 writes, decoded by
// topic, and its watermark.
func (e *engine) popped(t *testing.T) (results []*hooklinev1.AttemptResult, retries []*hooklinev1.Delivery, dead []*hooklinev1.DeadLetter, retryRecs []*kgo.Record, mark int64) {
	t.Helper()
	pw := e.w.parts[tp{e.s.topics.Deliveries, 0}]
	outs, mark, _ := e.w.popDone(pw, e.s.now(), nil)
	for _, o := range outs {
		switch o.Topic {
		case e.s.topics.Results:
			r := new(hooklinev1.AttemptResult)
			mustDecode(t, o, r)
			results = append(results, r)
		case e.s.topics.Retries:
			d := new(hooklinev1.Delivery)
			mustDecode(t, o, d)
			retries = append(retries, d)
			retryRecs = append(retryRecs, o)
		case e.s.topics.Dead:
			dl := new(hooklinev1.DeadLetter)
			mustDecode(t, o, dl)
			dead = append(dead, dl)
		}
	}
	return results, retries, dead, retryRecs, mark
}

func mustDecode(t *testing.T, r *kgo.Record, m proto.Message) {
	t.Helper()
	if err := hkafka.Decode(r, m); err != nil {
		t.Fatal(err)
	}
}

// verifyBatch checks req's signature with secret and returns its members'
// event ids.
func verifyBatch(t *testing.T, secret string, req batchRequest) []string {
	t.Helper()
	v, err := sign.NewVerifier(secret)
	if err != nil {
		t.Fatal(err)
	}
	ts, _ := strconv.ParseInt(req.timestamp, 10, 64)
	if err := v.Verify(req.id, req.timestamp, req.signature, req.body, time.Unix(ts, 0), time.Minute); err != nil {
		t.Fatalf("batch %s does not verify: %v", req.id, err)
	}
	members, err := batch.Decode(req.body)
	if err != nil {
		t.Fatal(err)
	}
	if req.size != strconv.Itoa(len(members)) {
		t.Fatalf("webhook-batch-size %q for %d members", req.size, len(members))
	}
	var ids []string
	for _, m := range members {
		ids = append(ids, m.ID)
		if want := fmt.Sprintf(`{"n":%s}`, m.ID[len("evt_"):]); string(m.Payload) != want {
			t.Fatalf("member %s payload %s, want %s", m.ID, m.Payload, want)
		}
	}
	return ids
}

// TestABatchingEndpointGetsItsDeliveriesInBatchesWithOneResultEach: twelve
// waiting deliveries of an endpoint batching five go in three signed
// requests listing them in order (5, 5, 2), each member gets its own
// DELIVERED result naming the batch, and the commit passes them all.
func TestABatchingEndpointGetsItsDeliveriesInBatchesWithOneResultEach(t *testing.T) {
	s := newTestService(t)
	secret, requests := batchReceiver(t, s, 5, 0, http.StatusNoContent)
	e := testEngine(t, s)
	e.pollEvents(t, 0, 12)
	e.run(t, s.now())

	reqs := requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	// Three batches in flight at once (the cap is 10): each lists its
	// members in order, and the batches take turns.
	byBatch := map[string]int{}
	firsts := map[string]bool{}
	for _, r := range reqs {
		ids := verifyBatch(t, secret, r)
		byBatch[r.id] = len(ids)
		firsts[ids[0]] = true
		var first int
		if _, err := fmt.Sscanf(ids[0], "evt_%d", &first); err != nil {
			t.Fatal(err)
		}
		for i, id := range ids {
			if id != fmt.Sprint("evt_", first+i) {
				t.Fatalf("batch members %v: want consecutive, in order", ids)
			}
		}
	}
	if !firsts["evt_0"] || !firsts["evt_5"] || !firsts["evt_10"] || byBatch[batch.ID([]string{"dlv_0", "dlv_1", "dlv_2", "dlv_3", "dlv_4"})] != 5 {
		t.Fatalf("batches %v: want 0-4, 5-9, 10-11", byBatch)
	}
	results, retries, dead, _, mark := e.popped(t)
	if len(results) != 12 || len(retries) != 0 || len(dead) != 0 || mark != 12 {
		t.Fatalf("%d results, %d retries, %d dead letters, watermark %d; want 12, 0, 0, 12", len(results), len(retries), len(dead), mark)
	}
	seen := map[string]bool{}
	for _, r := range results {
		if r.GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED || byBatch[r.GetBatchId()] != int(r.GetBatchSize()) || seen[r.GetDeliveryId()] {
			t.Fatalf("result %v: want DELIVERED once per member, naming its batch and size", r)
		}
		seen[r.GetDeliveryId()] = true
	}
}

// TestARetriedBatchSendsTheSameMembersBodyAndID: a batch answered 503 is
// retried as one record carrying its members; the retry sends the same
// body under the same webhook-id, each member reporting each attempt.
func TestARetriedBatchSendsTheSameMembersBodyAndID(t *testing.T) {
	clock := newFakeClock(time.Now())
	s := newTestService(t, clock.option())
	secret, requests := batchReceiver(t, s, 10, 0, http.StatusServiceUnavailable, http.StatusNoContent)
	e := testEngine(t, s)
	e.pollEvents(t, 0, 4)
	e.run(t, clock.Now())
	results, retries, _, _, mark := e.popped(t)
	if len(results) != 4 || len(retries) != 1 || mark != 4 {
		t.Fatalf("after a 503: %d results, %d retry records, watermark %d; want 4, 1 (the batch), 4", len(results), len(retries), mark)
	}
	for _, r := range results {
		if r.GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED || r.GetBatchId() != retries[0].GetDeliveryId() {
			t.Fatalf("result %v: want RETRY_SCHEDULED naming batch %s", r, retries[0].GetDeliveryId())
		}
	}
	retry := retries[0]
	if len(retry.GetBatch().GetMembers()) != 4 || retry.GetAttempt() != 2 || s.handler.keys.VerifyDelivery(retry) != nil {
		t.Fatalf("retry %v: want the batch's 4 members, attempt 2, authenticated", retry)
	}
	clock.Set(retry.GetDueAt().AsTime().Add(2 * time.Second)) // a later second: a fresh signature
	e.placeDelivery(t, retry, 100, clock.Now())
	e.run(t, clock.Now())

	reqs := requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	if !bytes.Equal(reqs[0].body, reqs[1].body) || reqs[0].id != reqs[1].id || reqs[0].signature == reqs[1].signature {
		t.Fatalf("retry sent body equal %v, id %s then %s, signature fresh %v; want the same body and id, a fresh signature",
			bytes.Equal(reqs[0].body, reqs[1].body), reqs[0].id, reqs[1].id, reqs[0].signature != reqs[1].signature)
	}
	verifyBatch(t, secret, reqs[1])
	results, retries, _, _, _ = e.popped(t)
	if len(results) != 4 || len(retries) != 0 {
		t.Fatalf("after the retry: %d results, %d retries; want 4, 0", len(results), len(retries))
	}
	for _, r := range results {
		if r.GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED || r.GetAttempt() != 2 {
			t.Fatalf("result %v: want DELIVERED at attempt 2", r)
		}
	}
}

// TestA400OnABatchDeadLettersEveryMember: a permanent failure of a batch
// ends every member FAILED with one result and its own dead letter,
// carrying its payload.
func TestA400OnABatchDeadLettersEveryMember(t *testing.T) {
	s := newTestService(t)
	_, requests := batchReceiver(t, s, 10, 0, http.StatusBadRequest)
	e := testEngine(t, s)
	e.pollEvents(t, 0, 3)
	e.run(t, s.now())
	results, retries, dead, _, _ := e.popped(t)
	if len(requests()) != 1 || len(results) != 3 || len(retries) != 0 || len(dead) != 3 {
		t.Fatalf("%d requests, %d results, %d retries, %d dead letters; want 1, 3, 0, 3", len(requests()), len(results), len(retries), len(dead))
	}
	for _, dl := range dead {
		d := dl.GetDelivery()
		if want := fmt.Sprintf(`{"n":%s}`, d.GetDeliveryId()[len("dlv_"):]); string(d.GetPayload()) != want || dl.GetLastResult().GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_FAILED || dl.GetLastResult().GetDeliveryId() != d.GetDeliveryId() {
			t.Fatalf("dead letter %v: want the member with its payload %s, FAILED", dl, want)
		}
	}
}

// TestAPartialBatchWaitsItsMaxWait: fewer members than max_events wait
// up to max_wait for more, then go as they are.
func TestAPartialBatchWaitsItsMaxWait(t *testing.T) {
	clock := newFakeClock(time.Now())
	s := newTestService(t, clock.option())
	_, requests := batchReceiver(t, s, 10, time.Second, http.StatusNoContent)
	e := testEngine(t, s)
	e.pollEvents(t, 0, 2)
	e.run(t, clock.Now())
	if n := len(requests()); n != 0 {
		t.Fatalf("%d requests before max_wait; want 0", n)
	}
	if at := e.f.nextWake(); !at.Equal(clock.Now().Add(time.Second)) {
		t.Fatalf("lane wakes at %v, want max_wait after its head queued (%v)", at, clock.Now().Add(time.Second))
	}
	clock.Add(time.Second)
	e.run(t, clock.Now())
	if reqs := requests(); len(reqs) != 1 || reqs[0].size != "2" {
		t.Fatalf("after max_wait: %d requests; want 1 of 2 members", len(reqs))
	}
}

// TestABatchCommitsWholeOrNotAtAll: a batch formed from separate records
// is committed whole: the watermark does not pass a member while another
// waits behind a delivery still in flight, and a commit's metadata names
// none of a batch's members unless it names them all.
func TestABatchCommitsWholeOrNotAtAll(t *testing.T) {
	w := newWindow(100, 1<<20)
	now := time.Now()
	var es []*entry
	for i := range 6 {
		es = append(es, w.add(&kgo.Record{Topic: "d", Partition: 0, Offset: int64(10 + i), Value: []byte("x")}, now, context.Background()))
	}
	group([]*entry{es[1], es[4]}) // a batch of offsets 11 and 14
	out := []*kgo.Record{{Topic: "results"}}
	for _, i := range []int{0, 1, 2, 4, 5} { // 13 still in flight
		w.finish(es[i], out)
	}
	pw := es[0].part
	if _, mark, _ := w.popDone(pw, now, nil); mark != 11 {
		t.Fatalf("watermark %d; want 11: 11 commits only with 14, behind 13 in flight", mark)
	}
	// Above the watermark, 11, 12, 14, 15 are done; a metadata cut after
	// 12 would commit 11 without 14.
	merged := []int64{11, 12, 14, 15}
	ens := []*entry{es[1], es[2], es[4], es[5]}
	for held, want := range map[int]int{4: 4, 3: 3, 2: 0, 1: 0, 0: 0} {
		if got := wholeGroupsAbove(merged, held, ens); got != want {
			t.Errorf("cut after %d of %v: %d held, want %d", held, merged, got, want)
		}
	}
	w.finish(es[3], out)
	if _, mark, _ := w.popDone(pw, now, nil); mark != 16 {
		t.Fatalf("after 13 finished: watermark %d; want 16", mark)
	}
}

// TestAHoldOfABatchBeingFormedKeepsItsBody: a batch formed from separate
// records has no record of its own in Kafka yet, so a hold (an unusable
// secret, outage mode) carries its body instead of naming the first
// member's record; once held, its own record is what later holds name.
func TestAHoldOfABatchBeingFormedKeepsItsBody(t *testing.T) {
	s := newTestService(t)
	ds := []*hooklinev1.Delivery{
		{DeliveryId: "dlv_1", EventId: "evt_1", TenantId: "t", EndpointId: "ep_1", EventType: "a", Payload: []byte(`{"n":1}`), Attempt: 1},
		{DeliveryId: "dlv_2", EventId: "evt_2", TenantId: "t", EndpointId: "ep_1", EventType: "a", Payload: []byte(`{"n":2}`), Attempt: 1},
	}
	first, err := hkafka.Record(s.topics.Deliveries, "ep_1", ds[0])
	if err != nil {
		t.Fatal(err)
	}
	first.Offset = 7
	bd := formBatch(s.handler.keys, ds)
	held := heldCopy(batchRecord(first, bd), bd)
	if !bytes.Equal(held.GetPayload(), bd.GetPayload()) || held.GetPayloadRecord() != nil {
		t.Fatalf("a batch being formed held by reference to %v; want its body kept", held.GetPayloadRecord())
	}
	own, err := hkafka.Record(s.topics.Deliveries, "ep_1", held)
	if err != nil {
		t.Fatal(err)
	}
	own.Offset = 99
	if again := heldCopy(own, held); len(again.GetPayload()) != 0 || again.GetPayloadRecord().GetOffset() != 99 {
		t.Fatalf("a batch with its own record held again as %v; want by reference to it", again)
	}
}

// TestAMemberOfARefusedBatchIsSetAsideOnItsOwn: a batch whose retry a
// broker refused is blamed with its members; formed again from their own
// records after the abort, each member is set aside on its own (FAILED,
// a result and a dead letter each) instead of making a batch of another
// id to be refused again.
func TestAMemberOfARefusedBatchIsSetAsideOnItsOwn(t *testing.T) {
	s := newTestService(t)
	_, requests := batchReceiver(t, s, 10, 0, http.StatusNoContent)
	e := testEngine(t, s)
	ds := []*hooklinev1.Delivery{
		{DeliveryId: "dlv_0", EventId: "evt_0", TenantId: "t", EndpointId: "ep_1", EventType: "a.b", Payload: []byte(`{"n":0}`), Attempt: 1},
		{DeliveryId: "dlv_1", EventId: "evt_1", TenantId: "t", EndpointId: "ep_1", EventType: "a.b", Payload: []byte(`{"n":1}`), Attempt: 1},
	}
	retry, err := hkafka.Record(s.topics.Retries, "ep_1", formBatch(s.handler.keys, ds))
	if err != nil {
		t.Fatal(err)
	}
	_, blamed := s.handler.writer.blameAbort([]refused{{R: retry, Err: kerrMessageTooLarge}}, s.now())
	if len(blamed) != 1 {
		t.Fatalf("blamed %v; want the batch", blamed)
	}
	e.pollEvents(t, 0, 3) // its two members and a third delivery
	e.run(t, s.now())
	results, _, dead, _, mark := e.popped(t)
	if mark != 3 || len(dead) != 2 {
		t.Fatalf("watermark %d, %d dead letters; want 3, the two blamed members", mark, len(dead))
	}
	states := map[string]hooklinev1.DeliveryState{}
	for _, r := range results {
		states[r.GetDeliveryId()] = r.GetState()
	}
	if states["dlv_0"] != hooklinev1.DeliveryState_DELIVERY_STATE_FAILED || states["dlv_1"] != hooklinev1.DeliveryState_DELIVERY_STATE_FAILED || states["dlv_2"] != hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED {
		t.Fatalf("states %v; want the members FAILED, the third DELIVERED", states)
	}
	if reqs := requests(); len(reqs) != 1 || reqs[0].size != "1" {
		t.Fatalf("%d requests; want 1, a batch of the third alone", len(reqs))
	}
}

// TestABatchFormedAgainWithOtherMembersIsNotSettledFromTheFirstOnesAnswer:
// a batch's receiver answered 2xx and the commit was lost; the partition
// read again, its first member forms a batch with a member that was not
// in the first one. The answer kept is the first batch's: the new one is
// POSTed (its new member never was), not settled from it.
func TestABatchFormedAgainWithOtherMembersIsNotSettledFromTheFirstOnesAnswer(t *testing.T) {
	s := newTestService(t)
	_, requests := batchReceiver(t, s, 10, 0, http.StatusNoContent)
	e := testEngine(t, s)
	e.pollEvents(t, 0, 1)
	e.run(t, s.now())
	if n := len(requests()); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
	// The commit never landed: the partition is read again, and a second
	// delivery has arrived behind the first.
	e.dropped(map[string][]int32{s.topics.Deliveries: {0}})
	e.sweep(s.now())
	e.pollEvents(t, 0, 2)
	e.run(t, s.now())
	reqs := requests()
	if len(reqs) != 2 || reqs[1].size != "2" {
		t.Fatalf("%d requests (last of %s members); want the batch of 2 POSTed", len(reqs), reqs[len(reqs)-1].size)
	}
	results, _, _, _, _ := e.popped(t)
	if len(results) != 2 {
		t.Fatalf("%d results, want 2", len(results))
	}
}

// TestTheSameBatchFormedAgainSettlesFromItsAnswer: formed again from the
// same members after its commit was lost, a batch the receiver answered
// 2xx settles from that answer, with no second POST.
func TestTheSameBatchFormedAgainSettlesFromItsAnswer(t *testing.T) {
	s := newTestService(t)
	_, requests := batchReceiver(t, s, 10, 0, http.StatusNoContent)
	e := testEngine(t, s)
	e.pollEvents(t, 0, 2)
	e.run(t, s.now())
	e.dropped(map[string][]int32{s.topics.Deliveries: {0}})
	e.sweep(s.now())
	e.pollEvents(t, 0, 2)
	e.run(t, s.now())
	if n := len(requests()); n != 1 {
		t.Fatalf("%d requests, want 1: the same batch settles from its answer", n)
	}
	if results, _, _, _, _ := e.popped(t); len(results) != 2 {
		t.Fatalf("%d results, want 2", len(results))
	}
}

// TestAProbeBatchWhoseMembersAreAllSetAsideIsOver: outage mode lets a
// batch through as its endpoint's probe, and every member is set aside
// before the attempt (a broker refused its records): the probe is over,
// so the next delivery probes instead of the endpoint's deliveries being
// held round and round (make sim seed 23: five batches and a delivery
// deferred for the outage over 100 times each, never probed).
func TestAProbeBatchWhoseMembersAreAllSetAsideIsOver(t *testing.T) {
	s := newTestService(t)
	_, requests := batchReceiver(t, s, 10, 0, http.StatusNoContent)
	now := s.now()
	th := health.Thresholds{FailingAfter: 5, OutageAfter: 2}
	s.rcv.Observe("ep_1", "a", false, false, now, th)
	s.rcv.Observe("ep_1", "b", false, false, now, th) // outage mode
	s.writer.unwritable.Mark("dlv_0", "refused by the broker", now)
	s.writer.unwritable.Mark("dlv_1", "refused by the broker", now)
	e := testEngine(t, s)
	e.pollEvents(t, 0, 2)
	e.run(t, now)
	results, _, dead, _, _ := e.popped(t)
	if len(requests()) != 0 || len(results) != 2 || len(dead) != 2 {
		t.Fatalf("%d requests, %d results, %d dead letters; want the two members set aside, nothing sent", len(requests()), len(results), len(dead))
	}
	if g, _ := s.rcv.OutageGate("ep_1", s.now().Add(time.Millisecond), true, time.Minute); g != health.Probe {
		t.Fatalf("after the probe batch was set aside: gate %v, want the next delivery to probe", g)
	}
}

// TestABatchAtTheWatermarkIsNotNamedAboveIt: a batch whose first member
// is its partition's watermark (a later member behind a delivery still in
// flight) is not committed above the watermark, whose metadata may name
// only offsets strictly above it — make sim seed 17: "hl1:0.1,…" refused
// by the next owner, which then did every settlement committed above
// again (two terminal results each).
func TestABatchAtTheWatermarkIsNotNamedAboveIt(t *testing.T) {
	w := newWindow(100, 1<<20)
	now := time.Now()
	var es []*entry
	for i := range 6 {
		es = append(es, w.add(&kgo.Record{Topic: "d", Partition: 0, Offset: int64(10 + i), Value: []byte("x")}, now, context.Background()))
	}
	group([]*entry{es[1], es[4]})            // a batch of offsets 11 and 14
	for _, i := range []int{0, 1, 2, 4, 5} { // 13 still in flight
		w.finish(es[i], []*kgo.Record{{Topic: "results"}})
	}
	pw := es[0].part
	if _, mark, _ := w.popDone(pw, now, nil); mark != 11 {
		t.Fatalf("watermark %d, want 11", mark)
	}
	if !es[1].atWatermark() || !es[4].atWatermark() || es[2].atWatermark() || es[5].atWatermark() {
		t.Fatalf("at the watermark: %v %v %v %v; want the batch's members only", es[1].atWatermark(), es[4].atWatermark(), es[2].atWatermark(), es[5].atWatermark())
	}
	// What may be named above 11: 12 and 15, not the batch.
	var above []int64
	for _, en := range []*entry{es[1], es[2], es[4], es[5]} {
		if !en.atWatermark() {
			above = append(above, en.rec.Offset)
		}
	}
	meta, held := encodeAbove(11, above, aboveMetaMax)
	if got, ok := decodeAbove(11, meta); !ok || held != 2 || !slices.Equal(got, []int64{12, 15}) {
		t.Fatalf("metadata %q decodes to %v (%v); want [12 15]", meta, got, ok)
	}
}
