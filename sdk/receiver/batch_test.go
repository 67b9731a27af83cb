package receiver_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookline/hookline/sdk/batch"
	"github.com/hookline/hookline/sdk/receiver"
)

var testMembers = []batch.Member{
	{ID: "evt_a", Type: "invoice.paid", Timestamp: t0.Add(-3 * time.Second), Payload: []byte(`{"invoice":"in_1"}`)},
	{ID: "evt_b", Type: "file.uploaded", Timestamp: t0.Add(-2 * time.Second), Payload: []byte{0, 1, 2, 0xff}},
	{ID: "evt_c", Type: "invoice.paid", Timestamp: t0.Add(-time.Second), Payload: []byte(`[1,2]`)},
}

// batchDelivery is a batched POST as the dispatcher makes it: the batch
// id as webhook-id, the signature over the whole body, and
// webhook-batch-size.
func batchDelivery(t *testing.T, ms []batch.Member, size int, secrets ...string) *http.Request {
	t.Helper()
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = "dlv_" + m.ID
	}
	req := delivery(t, batch.ID(ids), t0, string(batch.Encode(ms)), secrets...)
	req.Header.Del("webhook-event-type")
	req.Header.Set("content-type", "application/json")
	req.Header.Set(batch.HeaderSize, strconv.Itoa(size))
	return req
}

// runReceiver runs rx until the test ends, and returns what its work
// function was given once every queued event was worked on.
func runReceiver(t *testing.T, opts ...receiver.Option) (*receiver.Receiver, func() []receiver.Event) {
	t.Helper()
	w := &worked{done: make(chan string, 100)}
	rx, err := receiver.New(w.do, []string{newSecret, pubKey}, append([]receiver.Option{receiver.WithClock(func() time.Time { return t0 })}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- rx.Run(ctx) }()
	return rx, func() []receiver.Event {
		stop()
		if err := <-ran; err != nil {
			t.Fatal(err)
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		return slices.Clone(w.evs)
	}
}

func serve(rx *receiver.Receiver, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	rx.ServeHTTP(rec, req)
	return rec
}

// TestABatchIsVerifiedWholeAndEachMemberWorkedOnAsItsOwnEvent: a batch
// signed over its body (v1 or v1a) is accepted, and each member reaches
// the work function as the event it would have been alone — its id,
// type, publish time and payload (base64 members decoded) — with the
// batch's id beside it.
func TestABatchIsVerifiedWholeAndEachMemberWorkedOnAsItsOwnEvent(t *testing.T) {
	for _, key := range []string{newSecret, privateKey} {
		rx, evs := runReceiver(t)
		req := batchDelivery(t, testMembers, 3, key)
		batchID := req.Header.Get("webhook-id")
		if rec := serve(rx, req); rec.Code != http.StatusAccepted {
			t.Fatalf("batch: %d %s, want 202", rec.Code, rec.Body)
		}
		got := evs() // workers run at once: in any order
		if len(got) != len(testMembers) {
			t.Fatalf("worked on %d events, want %d", len(got), len(testMembers))
		}
		slices.SortFunc(got, func(a, b receiver.Event) int { return strings.Compare(a.ID, b.ID) })
		for i, ev := range got {
			m := testMembers[i]
			if ev.ID != m.ID || ev.Type != m.Type || !ev.Timestamp.Equal(m.Timestamp) || string(ev.Body) != string(m.Payload) || ev.BatchID != batchID {
				t.Errorf("event %d is %+v, want member %+v of batch %s", i, ev, m, batchID)
			}
		}
	}
}

// TestBatchMembersAreDeduplicatedOneByOne: a member already taken — sent
// alone before, or in an earlier attempt of the batch — is not worked on
// again; a batch all of whose members are taken is answered 200.
func TestBatchMembersAreDeduplicatedOneByOne(t *testing.T) {
	rx, evs := runReceiver(t)
	if rec := serve(rx, delivery(t, "evt_b", t0, `{}`, newSecret)); rec.Code != http.StatusAccepted {
		t.Fatalf("evt_b alone: %d", rec.Code)
	}
	if rec := serve(rx, batchDelivery(t, testMembers, 3, newSecret)); rec.Code != http.StatusAccepted {
		t.Fatalf("batch: %d, want 202", rec.Code)
	}
	if rec := serve(rx, batchDelivery(t, testMembers, 3, newSecret)); rec.Code != http.StatusOK {
		t.Fatalf("the batch again: %d, want 200 (every member a duplicate)", rec.Code)
	}
	var ids []string
	for _, ev := range evs() {
		ids = append(ids, ev.ID)
	}
	slices.Sort(ids)
	if strings.Join(ids, ",") != "evt_a,evt_b,evt_c" {
		t.Fatalf("worked on %v, want each member once (evt_b alone)", ids)
	}
}

// TestABatchThatDoesNotAddUpIsRefusedAndTakesNothing: a
// webhook-batch-size that is not the body's member count, not a count,
// or a body that is not a batch is 400 and claims no member; a tampered
// body is 401 as any webhook's.
func TestABatchThatDoesNotAddUpIsRefusedAndTakesNothing(t *testing.T) {
	rx, evs := runReceiver(t)
	tampered := batchDelivery(t, testMembers, 3, newSecret)
	tampered.Body = httptest.NewRequest(http.MethodPost, "/", strings.NewReader(string(batch.Encode(testMembers[:2])))).Body
	notABatch := delivery(t, "bat_x", t0, `{"invoice":"in_1"}`, newSecret)
	notABatch.Header.Set(batch.HeaderSize, "1")
	tests := []struct {
		name string
		req  *http.Request
		want int
		says string
	}{
		{"more members than the header says", batchDelivery(t, testMembers, 2, newSecret), http.StatusBadRequest, "webhook-batch-size says 2 members, the body lists 3"},
		{"fewer", batchDelivery(t, testMembers, 4, newSecret), http.StatusBadRequest, "says 4 members, the body lists 3"},
		{"not a count", batchDelivery(t, testMembers, -1, newSecret), http.StatusBadRequest, "is not a member count"},
		{"not a batch body", notABatch, http.StatusBadRequest, "not a batch body"},
		{"tampered", tampered, http.StatusUnauthorized, ""},
	}
	for _, tt := range tests {
		rec := serve(rx, tt.req)
		if rec.Code != tt.want || !strings.Contains(rec.Body.String(), tt.says) {
			t.Errorf("%s: %d %q, want %d saying %q", tt.name, rec.Code, rec.Body, tt.want, tt.says)
		}
	}
	if rec := serve(rx, batchDelivery(t, testMembers, 3, newSecret)); rec.Code != http.StatusAccepted {
		t.Fatalf("the right batch after the refusals: %d, want 202 (nothing was taken)", rec.Code)
	}
	if n := len(evs()); n != 3 {
		t.Fatalf("worked on %d events, want 3", n)
	}
}

// TestABatchLargerThanTheQueueIs503AndItsRetryFinishesIt: members that
// do not fit the queue are not taken and the batch is answered 503;
// those queued stay taken, so Hookline's retry of the same batch works
// on the rest only.
func TestABatchLargerThanTheQueueIs503AndItsRetryFinishesIt(t *testing.T) {
	block := make(chan struct{})
	started := make(chan string, 10)
	var mu sync.Mutex
	var worked []string
	rx, err := receiver.New(func(_ context.Context, ev receiver.Event) error {
		started <- ev.ID
		<-block
		mu.Lock()
		worked = append(worked, ev.ID)
		mu.Unlock()
		return nil
	}, []string{newSecret}, receiver.WithClock(func() time.Time { return t0 }), receiver.WithWorkers(1), receiver.WithQueue(1))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- rx.Run(ctx) }()
	if rec := serve(rx, delivery(t, "evt_busy", t0, `{}`, newSecret)); rec.Code != http.StatusAccepted {
		t.Fatalf("evt_busy: %d", rec.Code)
	}
	<-started // the worker holds evt_busy; the queue has room for one
	rec := serve(rx, batchDelivery(t, testMembers, 3, newSecret))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("batch with room for one member: %d, want 503 with Retry-After", rec.Code)
	}
	close(block)
	<-started // evt_busy done, evt_a (queued) taken: room again
	// The retry: evt_a is a duplicate, evt_b and evt_c are queued as the
	// queue frees.
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec = serve(rx, batchDelivery(t, testMembers, 3, newSecret))
		if rec.Code == http.StatusAccepted || rec.Code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the batch's retries never accepted: %d", rec.Code)
		}
		<-started // a member was taken from the queue: room again
	}
	stop()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(worked)
	if strings.Join(worked, ",") != "evt_a,evt_b,evt_busy,evt_c" {
		t.Fatalf("worked on %v, want each member once and evt_busy", worked)
	}
}
