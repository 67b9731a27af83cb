package e2e

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/kafkatest"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// receiver is an httptest webhook receiver that answers code and records
// what it got.
type receiver struct {
	*httptest.Server
	code  atomic.Int32
	mu    sync.Mutex
	posts []post
}

type post struct {
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T, code int) *receiver {
	rx := &receiver{}
	rx.code.Store(int32(code))
	rx.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := make([]byte, r.ContentLength)
		_, _ = r.Body.Read(body)
		rx.mu.Lock()
		rx.posts = append(rx.posts, post{header: r.Header.Clone(), body: body})
		rx.mu.Unlock()
		w.WriteHeader(int(rx.code.Load()))
	}))
	t.Cleanup(rx.Close)
	return rx
}

func (rx *receiver) got() []post {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	return append([]post(nil), rx.posts...)
}

func (st *stack) createEndpoint(url string) *hooklinev1.CreateEndpointResponse {
	st.t.Helper()
	resp, err := st.endpoints().CreateEndpoint(st.ctx(), &hooklinev1.CreateEndpointRequest{Url: url, Description: "test receiver"})
	if err != nil {
		st.t.Fatal(err)
	}
	return resp
}

func (st *stack) publish(eventType, payload string) *hooklinev1.PublishEventResponse {
	st.t.Helper()
	resp, err := st.events().PublishEvent(st.ctx(), &hooklinev1.PublishEventRequest{EventType: eventType, Payload: []byte(payload)})
	if err != nil {
		st.t.Fatal(err)
	}
	return resp
}

func TestDeliveredOnceSignedAndReportedAsSuccess(t *testing.T) {
	st := startStack(t)
	rx := newReceiver(t, http.StatusOK)
	ep := st.createEndpoint(rx.URL + "/hooks")
	payload := `{"invoice":"in_1","amount":4200}`
	pub := st.publish("invoice.paid", payload)
	if len(pub.GetDeliveries()) != 1 || pub.GetDeliveries()[0].GetEndpointId() != ep.GetEndpoint().GetId() {
		t.Fatalf("want one delivery to %s, got %v", ep.GetEndpoint().GetId(), pub.GetDeliveries())
	}

	results := kafkatest.Decode(t, st.readN(st.topics.Results, 1), func() *hooklinev1.AttemptResult { return &hooklinev1.AttemptResult{} })
	r := results[0]
	if r.GetClass() != hooklinev1.OutcomeClass_OUTCOME_CLASS_SUCCESS || r.GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED ||
		r.GetStatusCode() != 200 || r.GetAttempt() != 1 || r.GetEventId() != pub.GetEventId() {
		t.Fatalf("unexpected result: %v", r)
	}

	posts := rx.got()
	if len(posts) != 1 {
		t.Fatalf("receiver got %d POSTs, want exactly 1", len(posts))
	}
	p := posts[0]
	if string(p.body) != payload {
		t.Fatalf("body %q, want the published bytes %q", p.body, payload)
	}
	if id := p.header.Get("webhook-id"); id != pub.GetEventId() {
		t.Fatalf("webhook-id %q, want event id %q", id, pub.GetEventId())
	}
	wh, err := standardwebhooks.NewWebhook(ep.GetSecret())
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(p.body, p.header); err != nil {
		t.Fatalf("signature does not verify with the reference library: %v", err)
	}
	if n := st.endOffsets(st.topics.Retries) + st.endOffsets(st.topics.Dead); n != 0 {
		t.Fatalf("a delivered event wrote %d records to retries/dead", n)
	}
}

func TestServerErrorSchedulesAttemptTwo(t *testing.T) {
	st := startStack(t)
	rx := newReceiver(t, http.StatusServiceUnavailable)
	st.createEndpoint(rx.URL)
	before := time.Now()
	pub := st.publish("invoice.paid", `{"n":1}`)

	res := kafkatest.Decode(t, st.readN(st.topics.Results, 1), func() *hooklinev1.AttemptResult { return &hooklinev1.AttemptResult{} })[0]
	if res.GetClass() != hooklinev1.OutcomeClass_OUTCOME_CLASS_TRANSIENT || res.GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED || res.GetStatusCode() != 503 {
		t.Fatalf("unexpected result: %v", res)
	}
	retry := kafkatest.Decode(t, st.readN(st.topics.Retries, 1), func() *hooklinev1.Delivery { return &hooklinev1.Delivery{} })[0]
	if retry.GetAttempt() != 2 || retry.GetEventId() != pub.GetEventId() || retry.GetDeliveryId() != pub.GetDeliveries()[0].GetDeliveryId() {
		t.Fatalf("retry record: %v", retry)
	}
	// Default policy: 1 m with equal jitter, so 30 s to 60 s after the attempt.
	if due := retry.GetDueAt().AsTime(); due.Before(before.Add(30*time.Second)) || due.After(time.Now().Add(61*time.Second)) {
		t.Fatalf("due at %v, want 30-60 s after %v", due, before)
	}
	if !retry.GetDueAt().AsTime().Equal(res.GetNextAttemptAt().AsTime()) {
		t.Fatalf("retry due %v differs from the result's next_attempt_at %v", retry.GetDueAt(), res.GetNextAttemptAt())
	}
	if retry.GetFirstAttemptAt() == nil || retry.GetGiveUpAt() == nil {
		t.Fatalf("the first attempt must fix first_attempt_at and give_up_at: %v", retry)
	}
	if len(rx.got()) != 1 {
		t.Fatalf("receiver got %d POSTs, want 1", len(rx.got()))
	}
}

func TestClientErrorDeadLettersWithoutRetry(t *testing.T) {
	st := startStack(t)
	rx := newReceiver(t, http.StatusBadRequest)
	st.createEndpoint(rx.URL)
	pub := st.publish("invoice.paid", `{"n":1}`)

	res := kafkatest.Decode(t, st.readN(st.topics.Results, 1), func() *hooklinev1.AttemptResult { return &hooklinev1.AttemptResult{} })[0]
	if res.GetClass() != hooklinev1.OutcomeClass_OUTCOME_CLASS_PERMANENT || res.GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_FAILED {
		t.Fatalf("unexpected result: %v", res)
	}
	dl := kafkatest.Decode(t, st.readN(st.topics.Dead, 1), func() *hooklinev1.DeadLetter { return &hooklinev1.DeadLetter{} })[0]
	if dl.GetDelivery().GetEventId() != pub.GetEventId() || dl.GetLastResult().GetStatusCode() != 400 {
		t.Fatalf("dead letter: %v", dl)
	}
	if n := st.endOffsets(st.topics.Retries); n != 0 {
		t.Fatalf("a permanent failure wrote %d records to retries", n)
	}
}

func TestFanOutFollowsFilters(t *testing.T) {
	st := startStack(t)
	rx := newReceiver(t, http.StatusNoContent)
	mk := func(types ...string) string {
		resp, err := st.endpoints().CreateEndpoint(st.ctx(), &hooklinev1.CreateEndpointRequest{Url: rx.URL, EventTypes: types})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetEndpoint().GetId()
	}
	all, invoices, exact := mk(), mk("invoice.*"), mk("invoice.paid")
	_ = mk("user.created")
	paused := mk("invoice.*")
	if _, err := st.endpoints().PauseEndpoint(st.ctx(), &hooklinev1.PauseEndpointRequest{Id: paused}); err != nil {
		t.Fatal(err)
	}
	pub := st.publish("invoice.paid", `{}`)
	got := map[string]bool{}
	for _, d := range pub.GetDeliveries() {
		got[d.GetEndpointId()] = true
	}
	want := map[string]bool{all: true, invoices: true, exact: true, paused: true}
	if len(got) != len(want) {
		t.Fatalf("fan-out to %v, want %v", got, want)
	}
	for id := range want {
		if !got[id] {
			t.Fatalf("fan-out missed %s: %v", id, got)
		}
	}
	// Three attempts and one parked delivery, in any order.
	results := kafkatest.Decode(t, st.readN(st.topics.Results, 4), func() *hooklinev1.AttemptResult { return &hooklinev1.AttemptResult{} })
	states := map[hooklinev1.DeliveryState]int{}
	for _, r := range results {
		states[r.GetState()]++
		if r.GetState() == hooklinev1.DeliveryState_DELIVERY_STATE_PARKED && r.GetEndpointId() != paused {
			t.Fatalf("parked the wrong endpoint: %v", r)
		}
	}
	if states[hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED] != 3 || states[hooklinev1.DeliveryState_DELIVERY_STATE_PARKED] != 1 {
		t.Fatalf("states %v", states)
	}
	// The paused endpoint's delivery is parked, once, attempt number
	// untouched, until the scheduler releases it (I45).
	held := kafkatest.Decode(t, st.readMatching(st.topics.Parked, 1, isPark), func() *hooklinev1.Delivery { return &hooklinev1.Delivery{} })[0]
	if held.GetEndpointId() != paused || held.GetAttempt() != 1 || held.GetKind() != hooklinev1.DeliveryKind_DELIVERY_KIND_DEFERRED || held.GetParkedAt() == nil {
		t.Fatalf("held delivery %v", held)
	}
	if n := len(rx.got()); n != 3 {
		t.Fatalf("receiver got %d POSTs, want 3 (the paused endpoint gets none)", n)
	}
}

func TestBadInputGetsAClearStatusAndWritesNothing(t *testing.T) {
	st := startStack(t)
	rx := newReceiver(t, http.StatusOK)
	st.createEndpoint(rx.URL)
	deliveriesBefore, endpointsBefore := st.endOffsets(st.topics.Deliveries), st.endOffsets(st.topics.Endpoints)

	big := `{"x":"` + strings.Repeat("a", 1<<20) + `"}`
	tests := []struct {
		name string
		call func() error
		code codes.Code
		says string
	}{
		{"missing event type", func() error {
			_, err := st.events().PublishEvent(st.ctx(), &hooklinev1.PublishEventRequest{Payload: []byte(`{}`)})
			return err
		}, codes.InvalidArgument, "event_type"},
		{"malformed event type", func() error {
			_, err := st.events().PublishEvent(st.ctx(), &hooklinev1.PublishEventRequest{EventType: "bad type", Payload: []byte(`{}`)})
			return err
		}, codes.InvalidArgument, "event_type"},
		{"oversized payload", func() error {
			_, err := st.events().PublishEvent(st.ctx(), &hooklinev1.PublishEventRequest{EventType: "a.b", Payload: []byte(big)})
			return err
		}, codes.InvalidArgument, "over the limit of 1048576 bytes"},
		{"payload not JSON", func() error {
			_, err := st.events().PublishEvent(st.ctx(), &hooklinev1.PublishEventRequest{EventType: "a.b", Payload: []byte(`{nope`)})
			return err
		}, codes.InvalidArgument, "payload"},
		{"unknown endpoint id", func() error {
			_, err := st.events().PublishEvent(st.ctx(), &hooklinev1.PublishEventRequest{EventType: "a.b", Payload: []byte(`{}`), EndpointIds: []string{"ep_01jzzzzzzzzzzzzzzzzzzzzzzz"}})
			return err
		}, codes.NotFound, "ep_01jzzzzzzzzzzzzzzzzzzzzzzz"},
		{"invalid URL", func() error {
			_, err := st.endpoints().CreateEndpoint(st.ctx(), &hooklinev1.CreateEndpointRequest{Url: "ftp://example.com/x"})
			return err
		}, codes.InvalidArgument, "url"},
		{"relative URL", func() error {
			_, err := st.endpoints().CreateEndpoint(st.ctx(), &hooklinev1.CreateEndpointRequest{Url: "/hooks"})
			return err
		}, codes.InvalidArgument, "url"},
		{"bad secret", func() error {
			_, err := st.endpoints().CreateEndpoint(st.ctx(), &hooklinev1.CreateEndpointRequest{Url: rx.URL, Secret: "hunter2"})
			return err
		}, codes.InvalidArgument, "secret"},
		{"bad filter", func() error {
			_, err := st.endpoints().CreateEndpoint(st.ctx(), &hooklinev1.CreateEndpointRequest{Url: rx.URL, EventTypes: []string{"in*"}})
			return err
		}, codes.InvalidArgument, "event_types[0]"},
		{"batch of one", func() error {
			_, err := st.endpoints().CreateEndpoint(st.ctx(), &hooklinev1.CreateEndpointRequest{Url: rx.URL, Batch: &hooklinev1.BatchSettings{MaxEvents: 1}})
			return err
		}, codes.InvalidArgument, "batch.max_events: must be 2 to 1000, got 1"},
		{"batching an ordered endpoint", func() error {
			_, err := st.endpoints().CreateEndpoint(st.ctx(), &hooklinev1.CreateEndpointRequest{Url: rx.URL, Ordering: hooklinev1.Ordering_ORDERING_PER_KEY, Batch: &hooklinev1.BatchSettings{MaxEvents: 10}})
			return err
		}, codes.InvalidArgument, "batching ordered endpoints is not built yet; unset ordering or batch"},
		{"wrong API key", func() error {
			_, err := st.events().PublishEvent(st.ctxAs("not-a-key-0000000000"), &hooklinev1.PublishEventRequest{EventType: "a.b", Payload: []byte(`{}`)})
			return err
		}, codes.Unauthenticated, "invalid API key"},
		{"no API key", func() error {
			_, err := st.events().PublishEvent(st.t.Context(), &hooklinev1.PublishEventRequest{EventType: "a.b", Payload: []byte(`{}`)})
			return err
		}, codes.Unauthenticated, "authorization"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			s, _ := status.FromError(err)
			if s.Code() != tt.code || !strings.Contains(s.Message(), tt.says) {
				t.Fatalf("got %v %q, want %v mentioning %q", s.Code(), s.Message(), tt.code, tt.says)
			}
			if strings.Contains(s.Message(), "hunter2") {
				t.Fatalf("error echoes the secret: %q", s.Message())
			}
		})
	}
	if d, e := st.endOffsets(st.topics.Deliveries), st.endOffsets(st.topics.Endpoints); d != deliveriesBefore || e != endpointsBefore {
		t.Fatalf("bad input wrote records: deliveries %d→%d, endpoints %d→%d", deliveriesBefore, d, endpointsBefore, e)
	}
}

// failOnceReceiver answers each webhook-id's first POST with failStatus
// and every later one 200, and remembers when each POST came.
type failOnceReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	posts map[string][]time.Time // by webhook-id
}

func newFailOnceReceiver(t *testing.T, failStatus int) *failOnceReceiver {
	t.Helper()
	rx := &failOnceReceiver{posts: map[string][]time.Time{}}
	rx.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rx.mu.Lock()
		id := r.Header.Get("webhook-id")
		rx.posts[id] = append(rx.posts[id], time.Now())
		n := len(rx.posts[id])
		rx.mu.Unlock()
		if n == 1 {
			w.WriteHeader(failStatus)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rx.Close)
	return rx
}

// postsOf returns when the POSTs of every webhook-id came, in order.
func (rx *failOnceReceiver) postsOf() [][]time.Time {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	out := make([][]time.Time, 0, len(rx.posts))
	for _, p := range rx.posts {
		out = append(out, slices.Clone(p))
	}
	return out
}
