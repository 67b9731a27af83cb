package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/kafkatest"
	"github.com/hookline/hookline/sdk/batch"
	"github.com/hookline/hookline/sdk/sign"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/durationpb"
)

// batchPost is one request a batching receiver got.
type batchPost struct {
	header http.Header
	body   []byte
}

// firstFailsReceiver answers status to the first request of each
// webhook-id and 200 to the next ones, and keeps every request.
type firstFailsReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	posts []batchPost
	seen  map[string]bool
}

func newFirstFailsReceiver(t *testing.T, status int) *firstFailsReceiver {
	rx := &firstFailsReceiver{seen: map[string]bool{}}
	rx.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id := r.Header.Get(sign.HeaderID)
		rx.mu.Lock()
		rx.posts = append(rx.posts, batchPost{header: r.Header.Clone(), body: body})
		first := !rx.seen[id]
		rx.seen[id] = true
		rx.mu.Unlock()
		if first {
			w.WriteHeader(status)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rx.Close)
	return rx
}

func (rx *firstFailsReceiver) got() []batchPost {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	return append([]batchPost(nil), rx.posts...)
}

// TestBatchedDeliveryRetriesTheSameBatchVerifiedByTheStandardWebhooksLibraries:
// events published to an endpoint batching them arrive in batches; each
// batch answered 503 comes again with the same body and webhook-id and a
// fresh signature, and both attempts verify with Hookline's receiver and
// the Standard Webhooks libraries for Python and Node; every member gets a
// RETRY_SCHEDULED then a DELIVERED result naming its batch.
func TestBatchedDeliveryRetriesTheSameBatchVerifiedByTheStandardWebhooksLibraries(t *testing.T) {
	st := startStack(t)
	rx := newFirstFailsReceiver(t, http.StatusServiceUnavailable)
	created := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{
		Url:         rx.URL + "/hooks",
		Batch:       &hooklinev1.BatchSettings{MaxEvents: 4, MaxWait: durationpb.New(300 * time.Millisecond)},
		RetryPolicy: ladderPolicy(3, 1200*time.Millisecond), // a later second: a fresh signature
		// Every batch's first try fails: outage mode would hold the
		// retries (the endpoint failing) — not what this test is about.
		OutageModeDisabled: true,
	})
	id, secret := created.GetEndpoint().GetId(), created.GetSecret()
	if got := created.GetEndpoint().GetBatch().GetMaxEvents(); got != 4 {
		t.Fatalf("created endpoint's batch %v: want max_events 4", created.GetEndpoint().GetBatch())
	}
	const events = 10
	want := map[string]string{}
	for i := range events {
		payload := fmt.Sprintf(`{"invoice":"in_%d","amount":%d}`, i, 100*i)
		want[st.publish("invoice.paid", payload).GetEventId()] = payload
	}
	results := st.resultsOf(id, 2*events)
	states := map[string][]hooklinev1.DeliveryState{}
	for _, r := range results {
		if r.GetBatchId() == "" || r.GetBatchSize() < 1 || r.GetBatchSize() > 4 {
			t.Fatalf("result %v: want its batch's id and size (1-4)", r)
		}
		states[r.GetDeliveryId()] = append(states[r.GetDeliveryId()], r.GetState())
	}
	for d, s := range states {
		if len(s) != 2 || s[0] != hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED || s[1] != hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED {
			t.Fatalf("delivery %s: results %v, want RETRY_SCHEDULED then DELIVERED", d, s)
		}
	}
	if len(states) != events {
		t.Fatalf("%d deliveries reported, want %d", len(states), events)
	}

	byID := map[string][]batchPost{}
	members := map[string]int{}
	for _, p := range rx.got() {
		byID[p.header.Get(sign.HeaderID)] = append(byID[p.header.Get(sign.HeaderID)], p)
	}
	var cases []verifyCase
	for bid, posts := range byID {
		if len(posts) != 2 || !bytes.Equal(posts[0].body, posts[1].body) || posts[0].header.Get(sign.HeaderSignature) == posts[1].header.Get(sign.HeaderSignature) {
			t.Fatalf("batch %s: %d posts; want 2 with the same body and fresh signatures", bid, len(posts))
		}
		ms, err := batch.Decode(posts[0].body)
		if err != nil {
			t.Fatal(err)
		}
		if posts[0].header.Get(batch.HeaderSize) != fmt.Sprint(len(ms)) {
			t.Fatalf("batch %s: webhook-batch-size %q for %d members", bid, posts[0].header.Get(batch.HeaderSize), len(ms))
		}
		var ids []string
		for _, m := range ms {
			ids = append(ids, m.ID)
			members[m.ID]++
			if string(m.Payload) != want[m.ID] || m.Type != "invoice.paid" {
				t.Fatalf("member %s: %s %s, want invoice.paid %s", m.ID, m.Type, m.Payload, want[m.ID])
			}
		}
		for i, p := range posts {
			headers := map[string]string{}
			for _, h := range []string{sign.HeaderID, sign.HeaderTimestamp, sign.HeaderSignature, batch.HeaderSize} {
				headers[h] = p.header.Get(h)
			}
			cases = append(cases, verifyCase{Name: fmt.Sprintf("batch %s attempt %d", bid, i+1), Secret: secret, Body: string(p.body), Headers: headers, WantOK: true, WantMembers: ids})
		}
	}
	if len(members) != events {
		t.Fatalf("%d events in the batches, want %d", len(members), events)
	}
	for ev, n := range members {
		if n != 1 {
			t.Fatalf("event %s in %d batches, want 1", ev, n)
		}
	}
	if len(byID) >= events {
		t.Fatalf("%d batches for %d events: not batched", len(byID), events)
	}
	verifyWithLibraries(t, cases)
}

// TestA400OnABatchDeadLettersEveryMemberWithOneResultEach: a batch the
// receiver refuses permanently ends every member FAILED, one result and
// one dead letter each, the dead letter carrying the member's payload.
func TestA400OnABatchDeadLettersEveryMemberWithOneResultEach(t *testing.T) {
	st := startStack(t)
	rx := newFirstFailsReceiver(t, http.StatusBadRequest)
	created := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{
		Url:   rx.URL + "/hooks",
		Batch: &hooklinev1.BatchSettings{MaxEvents: 10, MaxWait: durationpb.New(500 * time.Millisecond)},
	})
	id := created.GetEndpoint().GetId()
	want := map[string]string{}
	for i := range 3 {
		payload := fmt.Sprintf(`{"n":%d}`, i)
		want[st.publish("order.created", payload).GetEventId()] = payload
	}
	results := st.resultsOf(id, 3)
	for _, r := range results {
		if r.GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_FAILED || r.GetBatchId() == "" {
			t.Fatalf("result %v: want FAILED naming its batch", r)
		}
	}
	var dead []*hooklinev1.DeadLetter
	st.readMatching(st.topics.Dead, 3, func(r *kgo.Record) bool {
		dl := kafkatest.Decode(t, []*kgo.Record{r}, func() *hooklinev1.DeadLetter { return new(hooklinev1.DeadLetter) })[0]
		if dl.GetDelivery().GetEndpointId() != id {
			return false
		}
		dead = append(dead, dl)
		return true
	})
	seen := map[string]bool{}
	for _, dl := range dead {
		d := dl.GetDelivery()
		if string(d.GetPayload()) != want[d.GetEventId()] || seen[d.GetDeliveryId()] || dl.GetLastResult().GetDeliveryId() != d.GetDeliveryId() {
			t.Fatalf("dead letter %v: want each member once with its payload", dl)
		}
		seen[d.GetDeliveryId()] = true
	}
	// Nothing more: no member was retried or reported twice.
	if extra := st.readFor(st.topics.Results, 2*time.Second); countOf(t, extra, id) != 3 {
		t.Fatalf("%d results of the endpoint in all, want 3", countOf(t, extra, id))
	}
}

// countOf counts the results in recs of endpoint id.
func countOf(t *testing.T, recs []*kgo.Record, id string) int {
	n := 0
	for _, r := range kafkatest.Decode(t, recs, newResult) {
		if r.GetEndpointId() == id {
			n++
		}
	}
	return n
}
