package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/kafkatest"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func (st *stack) deliveries() hooklinev1.DeliveryServiceClient {
	return hooklinev1.NewDeliveryServiceClient(st.conn)
}

func TestDeliveryStatusShowsEveryAttemptAndResendMakesExactlyOneMore(t *testing.T) {
	st := startStack(t)
	rx := newReceiver(t, http.StatusInternalServerError)
	// One attempt, then dead: the delivery fails at once.
	ep := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, RetryPolicy: ladderPolicy(1, time.Minute)})
	epID := ep.GetEndpoint().GetId()
	pub := st.publish("invoice.paid", `{"n":1}`)
	dlv := pub.GetDeliveries()[0].GetDeliveryId()
	st.readN(st.topics.Results, 1)

	api := st.deliveries()
	got, err := api.GetDelivery(st.ctx(), &hooklinev1.GetDeliveryRequest{DeliveryId: dlv})
	if err != nil {
		t.Fatal(err)
	}
	if s := got.GetDelivery(); s.GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_FAILED || s.GetAttempts() != 1 || s.GetEventId() != pub.GetEventId() || s.GetEndpointId() != epID {
		t.Fatalf("status %v, want FAILED after 1 attempt", s)
	}
	if a := got.GetAttempts(); len(a) != 1 || a[0].GetStatusCode() != 500 || a[0].GetClass() != hooklinev1.OutcomeClass_OUTCOME_CLASS_TRANSIENT || a[0].GetLatency() == nil {
		t.Fatalf("attempts %v, want one 500 TRANSIENT with its latency", a)
	}
	ev, err := api.GetEvent(st.ctx(), &hooklinev1.GetEventRequest{EventId: pub.GetEventId()})
	if err != nil || string(ev.GetPayload()) != `{"n":1}` || len(ev.GetDeliveries()) != 1 || ev.GetDeliveries()[0].GetDeliveryId() != dlv {
		t.Fatalf("GetEvent: %v, %v", ev, err)
	}

	// Paused: refused, nothing written.
	if _, err := st.endpoints().PauseEndpoint(st.ctx(), &hooklinev1.PauseEndpointRequest{Id: epID}); err != nil {
		t.Fatal(err)
	}
	before := st.endOffsets(st.topics.Deliveries)
	if _, err := api.ResendDelivery(st.ctx(), &hooklinev1.ResendDeliveryRequest{DeliveryId: dlv}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("resend while paused: want FailedPrecondition, got %v", err)
	}
	if after := st.endOffsets(st.topics.Deliveries); after != before {
		t.Fatalf("a refused resend wrote %d deliveries", after-before)
	}
	if _, err := st.endpoints().ResumeEndpoint(st.ctx(), &hooklinev1.ResumeEndpointRequest{Id: epID}); err != nil {
		t.Fatal(err)
	}

	// A resend that fails is not retried: attempt 2 ends the delivery.
	rs, err := api.ResendDelivery(st.ctx(), &hooklinev1.ResendDeliveryRequest{DeliveryId: dlv})
	if err != nil || rs.GetAttempt() != 2 {
		t.Fatalf("resend: %v, %v; want attempt 2", rs, err)
	}
	// The resend's own result: a dispatcher whose view has not read the
	// resume yet parks it first (a PARKED result, attempt 0) and attempts
	// it when the scheduler releases it.
	res := kafkatest.Decode(t, st.readMatching(st.topics.Results, 1, resultOfAttempt(2)), func() *hooklinev1.AttemptResult { return &hooklinev1.AttemptResult{} })[0]
	if res.GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_FAILED {
		t.Fatalf("resend result %v, want attempt 2 FAILED", res)
	}
	if n := st.endOffsets(st.topics.Retries); n != 0 {
		t.Fatalf("a failed resend scheduled %d retries", n)
	}

	// A resend to a receiver that recovered delivers, once.
	rx.code.Store(http.StatusOK)
	if _, err := api.ResendDelivery(st.ctx(), &hooklinev1.ResendDeliveryRequest{DeliveryId: dlv}); err != nil {
		t.Fatal(err)
	}
	st.readMatching(st.topics.Results, 1, resultOfAttempt(3))
	got, err = api.GetDelivery(st.ctx(), &hooklinev1.GetDeliveryRequest{DeliveryId: dlv})
	if err != nil {
		t.Fatal(err)
	}
	// A resend parked first (above) has a PARKED result too, attempt 0:
	// a row of its history, not an attempt.
	made := 0
	for _, a := range got.GetAttempts() {
		if a.GetAttempt() > 0 {
			made++
		}
	}
	if s := got.GetDelivery(); s.GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED || s.GetAttempts() != 3 || made != 3 {
		t.Fatalf("after the resend: %v with %d attempts (%d rows), want DELIVERED after 3", s, made, len(got.GetAttempts()))
	}
	posts := rx.got()
	if len(posts) != 3 {
		t.Fatalf("receiver got %d POSTs, want 3 (first attempt, failed resend, resend)", len(posts))
	}
	for _, p := range posts {
		if p.header.Get("webhook-id") != pub.GetEventId() || string(p.body) != `{"n":1}` {
			t.Fatalf("a resend changed the webhook-id or body: %q %q", p.header.Get("webhook-id"), p.body)
		}
	}
}

func TestListDeliveriesByEventEndpointAndStatePaginates(t *testing.T) {
	st := startStack(t)
	ok := newReceiver(t, http.StatusOK)
	gone := newReceiver(t, http.StatusGone) // permanent: FAILED at once
	okEP := st.createEndpoint(ok.URL).GetEndpoint().GetId()
	goneEP := st.createEndpoint(gone.URL).GetEndpoint().GetId()
	var pubs []*hooklinev1.PublishEventResponse
	for range 3 {
		pubs = append(pubs, st.publish("invoice.paid", `{}`))
	}
	st.readN(st.topics.Results, 6)
	api := st.deliveries()

	tests := []struct {
		name string
		give *hooklinev1.ListDeliveriesRequest
		want int
	}{
		{"by event", &hooklinev1.ListDeliveriesRequest{EventId: pubs[1].GetEventId()}, 2},
		{"by endpoint", &hooklinev1.ListDeliveriesRequest{EndpointId: okEP}, 3},
		{"by endpoint and state", &hooklinev1.ListDeliveriesRequest{EndpointId: goneEP, State: hooklinev1.DeliveryState_DELIVERY_STATE_FAILED}, 3},
		{"a state none is in", &hooklinev1.ListDeliveriesRequest{EndpointId: okEP, State: hooklinev1.DeliveryState_DELIVERY_STATE_FAILED}, 0},
		{"by endpoint, one a page", &hooklinev1.ListDeliveriesRequest{EndpointId: okEP, PageSize: 1}, 3},
		{"by event type", &hooklinev1.ListDeliveriesRequest{EventType: "invoice.paid", PageSize: 2}, 6},
		{"by another event type", &hooklinev1.ListDeliveriesRequest{EventType: "invoice.void"}, 0},
		{"by state alone", &hooklinev1.ListDeliveriesRequest{State: hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED}, 3},
		{"created in a range holding all", &hooklinev1.ListDeliveriesRequest{Since: timestamppb.New(time.Now().Add(-time.Hour)), Until: timestamppb.New(time.Now().Add(time.Hour))}, 6},
		{"created in a range holding none", &hooklinev1.ListDeliveriesRequest{Until: timestamppb.New(time.Now().Add(-time.Hour))}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen := map[string]bool{}
			req := tt.give
			for pages := 0; ; pages++ {
				if pages > tt.want {
					t.Fatal("pagination does not end")
				}
				resp, err := api.ListDeliveries(st.ctx(), req)
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range resp.GetDeliveries() {
					if seen[d.GetDeliveryId()] {
						t.Fatalf("%s listed twice", d.GetDeliveryId())
					}
					seen[d.GetDeliveryId()] = true
				}
				if resp.GetNextPageToken() == "" {
					break
				}
				req.PageToken = resp.GetNextPageToken()
			}
			if len(seen) != tt.want {
				t.Fatalf("listed %d deliveries, want %d", len(seen), tt.want)
			}
		})
	}
	if resp, err := api.ListDeliveries(st.ctx(), &hooklinev1.ListDeliveriesRequest{PageSize: 1000}); err != nil || len(resp.GetDeliveries()) != 6 {
		t.Fatalf("no filter: %d deliveries, %v; want all 6 of the tenant's", len(resp.GetDeliveries()), err)
	}
	first, err := api.ListDeliveries(st.ctx(), &hooklinev1.ListDeliveriesRequest{EndpointId: okEP, PageSize: 1})
	if err != nil || first.GetNextPageToken() == "" {
		t.Fatalf("first page: %v, %v; want a next page", first, err)
	}
	tok := []byte(first.GetNextPageToken())
	tok[len(tok)/2] ^= 1
	for name, give := range map[string]*hooklinev1.ListDeliveriesRequest{
		"a tampered token":           {EndpointId: okEP, PageSize: 1, PageToken: string(tok)},
		"a token with other filters": {EndpointId: goneEP, PageSize: 1, PageToken: first.GetNextPageToken()},
	} {
		if _, err := api.ListDeliveries(st.ctx(), give); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
	evs, err := api.ListEvents(st.ctx(), &hooklinev1.ListEventsRequest{EventType: "invoice.paid", PageSize: 2})
	if err != nil || len(evs.GetEvents()) != 2 || evs.GetNextPageToken() == "" {
		t.Fatalf("ListEvents page 1: %v, %v; want 2 events and a next page", evs, err)
	}
	// Lists are in id order; ids made in the same millisecond sort by
	// their random part, so the last is the greatest id, not always the
	// last published.
	last := max(pubs[0].GetEventId(), pubs[1].GetEventId(), pubs[2].GetEventId())
	evs, err = api.ListEvents(st.ctx(), &hooklinev1.ListEventsRequest{EventType: "invoice.paid", PageSize: 2, PageToken: evs.GetNextPageToken()})
	if err != nil || len(evs.GetEvents()) != 1 || evs.GetEvents()[0].GetEventId() != last || evs.GetNextPageToken() != "" {
		t.Fatalf("ListEvents page 2: %v, %v; want the last event only", evs, err)
	}
}

// Another tenant asking for any of it gets NotFound, as for a missing id,
// and a resend attempt by it writes nothing.
func TestDeliveryServiceHidesOtherTenants(t *testing.T) {
	st := startStack(t)
	rx := newReceiver(t, http.StatusOK)
	epID := st.createEndpoint(rx.URL).GetEndpoint().GetId()
	pub := st.publish("invoice.paid", `{}`)
	dlv := pub.GetDeliveries()[0].GetDeliveryId()
	st.readN(st.topics.Results, 1)
	other := hooklinev1.NewDeliveryServiceClient(st.startReplica())
	ctx := st.ctxAs(otherTenantKey)
	before := st.endOffsets(st.topics.Deliveries)

	calls := map[string]func() error{
		"GetEvent": func() error {
			_, err := other.GetEvent(ctx, &hooklinev1.GetEventRequest{EventId: pub.GetEventId()})
			return err
		},
		"GetDelivery": func() error {
			_, err := other.GetDelivery(ctx, &hooklinev1.GetDeliveryRequest{DeliveryId: dlv})
			return err
		},
		"ResendDelivery": func() error {
			_, err := other.ResendDelivery(ctx, &hooklinev1.ResendDeliveryRequest{DeliveryId: dlv})
			return err
		},
		"SendTestEvent": func() error {
			_, err := other.SendTestEvent(ctx, &hooklinev1.SendTestEventRequest{EndpointId: epID})
			return err
		},
		"RecoverEndpoint": func() error {
			stream, err := other.RecoverEndpoint(ctx, &hooklinev1.RecoverEndpointRequest{EndpointId: epID, Since: timestamppb.New(time.Now().Add(-time.Hour))})
			if err == nil {
				_, err = stream.Recv()
			}
			return err
		},
	}
	for name, call := range calls {
		if err := call(); status.Code(err) != codes.NotFound {
			t.Errorf("%s across tenants: want NotFound, got %v", name, err)
		}
	}
	for _, req := range []*hooklinev1.ListDeliveriesRequest{{EventId: pub.GetEventId()}, {EndpointId: epID}} {
		if resp, err := other.ListDeliveries(ctx, req); status.Code(err) != codes.NotFound {
			t.Errorf("ListDeliveries(%v) across tenants: %v, %v; want NotFound", req, resp, err)
		}
	}
	if after := st.endOffsets(st.topics.Deliveries); after != before {
		t.Fatalf("cross-tenant calls wrote %d deliveries", after-before)
	}
}

// recoverAll runs RecoverEndpoint to its end and returns every progress
// report.
func (st *stack) recoverAll(req *hooklinev1.RecoverEndpointRequest) []*hooklinev1.RecoverEndpointResponse {
	st.t.Helper()
	ctx, cancel := context.WithTimeout(st.ctx(), waitFor)
	defer cancel()
	stream, err := st.deliveries().RecoverEndpoint(ctx, req)
	if err != nil {
		st.t.Fatal(err)
	}
	var out []*hooklinev1.RecoverEndpointResponse
	for {
		p, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			st.t.Fatalf("recover: %v (after %v)", err, out)
		}
		out = append(out, p)
	}
}

func TestRecoverAfterAnOutageDeliversEachDeadLetterOnce(t *testing.T) {
	st := startStack(t)
	rx := newReceiver(t, http.StatusServiceUnavailable)
	// Outage mode off: this test wants every delivery to fail and be
	// dead-lettered, as it would without it.
	epID := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, RetryPolicy: ladderPolicy(1, time.Minute), OutageModeDisabled: true}).GetEndpoint().GetId()
	since := time.Now().Add(-time.Second)
	const n = 40
	events := map[string]bool{}
	for i := range n {
		events[st.publish("invoice.paid", fmt.Sprintf(`{"n":%d}`, i)).GetEventId()] = true
	}
	st.readN(st.topics.Dead, n)

	// Paused: refused.
	if _, err := st.endpoints().PauseEndpoint(st.ctx(), &hooklinev1.PauseEndpointRequest{Id: epID}); err != nil {
		t.Fatal(err)
	}
	stream, err := st.deliveries().RecoverEndpoint(st.ctx(), &hooklinev1.RecoverEndpointRequest{EndpointId: epID, Since: timestamppb.New(since)})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("recover while paused: want FailedPrecondition, got %v", err)
	}
	if _, err := st.endpoints().ResumeEndpoint(st.ctx(), &hooklinev1.ResumeEndpointRequest{Id: epID}); err != nil {
		t.Fatal(err)
	}

	rx.code.Store(http.StatusOK)
	progress := st.recoverAll(&hooklinev1.RecoverEndpointRequest{EndpointId: epID, Since: timestamppb.New(since)})
	final := progress[len(progress)-1]
	if !final.GetDone() || final.GetTotal() != n || final.GetDelivered() != n {
		t.Fatalf("final progress %v, want %d/%d delivered", final, n, n)
	}
	for i := 1; i < len(progress); i++ {
		if progress[i].GetDelivered() < progress[i-1].GetDelivered() {
			t.Fatalf("progress went backwards: %v then %v", progress[i-1], progress[i])
		}
	}
	delivered := map[string]int{}
	for _, p := range rx.got()[n:] {
		delivered[p.header.Get("webhook-id")]++
	}
	for id := range events {
		if delivered[id] != 1 {
			t.Fatalf("event %s recovered %d times, want once", id, delivered[id])
		}
	}

	// The same window again: everything was delivered, nothing to send.
	before := st.endOffsets(st.topics.Deliveries)
	again := st.recoverAll(&hooklinev1.RecoverEndpointRequest{EndpointId: epID, Since: timestamppb.New(since)})
	if last := again[len(again)-1]; !last.GetDone() || last.GetTotal() != 0 {
		t.Fatalf("second recover: %v, want nothing to do", last)
	}
	if after := st.endOffsets(st.topics.Deliveries); after != before {
		t.Fatalf("second recover wrote %d deliveries", after-before)
	}
	if got := len(rx.got()); got != 2*n {
		t.Fatalf("receiver got %d POSTs, want %d", got, 2*n)
	}
}

func TestSendTestEventReturnsTheSignedAttemptsOutcomeAndIsNotRetried(t *testing.T) {
	st := startStack(t)
	rx := newReceiver(t, http.StatusOK)
	ep := st.createEndpoint(rx.URL)
	epID := ep.GetEndpoint().GetId()
	api := st.deliveries()

	ok, err := api.SendTestEvent(st.ctx(), &hooklinev1.SendTestEventRequest{EndpointId: epID})
	if err != nil {
		t.Fatal(err)
	}
	if r := ok.GetResult(); r.GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED || r.GetStatusCode() != 200 || r.GetDeliveryId() != ok.GetDeliveryId() {
		t.Fatalf("test event result %v, want DELIVERED 200", r)
	}
	posts := rx.got()
	if len(posts) != 1 || posts[0].header.Get("webhook-id") != ok.GetEventId() || string(posts[0].body) != `{"test":true}` {
		t.Fatalf("receiver got %d POSTs (%v), want the test event once", len(posts), posts)
	}
	wh, err := standardwebhooks.NewWebhook(ep.GetSecret())
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(posts[0].body, posts[0].header); err != nil {
		t.Fatalf("test event signature does not verify: %v", err)
	}

	rx.code.Store(http.StatusServiceUnavailable)
	failed, err := api.SendTestEvent(st.ctx(), &hooklinev1.SendTestEventRequest{EndpointId: epID})
	if err != nil {
		t.Fatal(err)
	}
	if r := failed.GetResult(); r.GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_FAILED || r.GetStatusCode() != 503 || r.GetClass() != hooklinev1.OutcomeClass_OUTCOME_CLASS_TRANSIENT {
		t.Fatalf("failed test event result %v, want FAILED 503 TRANSIENT", r)
	}
	if n := st.endOffsets(st.topics.Retries); n != 0 {
		t.Fatalf("a failed test event scheduled %d retries", n)
	}
	// A failed test event is not a delivery to recover.
	rx.code.Store(http.StatusOK)
	progress := st.recoverAll(&hooklinev1.RecoverEndpointRequest{EndpointId: epID, Since: timestamppb.New(time.Now().Add(-time.Hour))})
	if last := progress[len(progress)-1]; last.GetTotal() != 0 {
		t.Fatalf("recover picked up test events: %v", last)
	}

	if _, err := st.endpoints().PauseEndpoint(st.ctx(), &hooklinev1.PauseEndpointRequest{Id: epID}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.SendTestEvent(st.ctx(), &hooklinev1.SendTestEventRequest{EndpointId: epID}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("test event while paused: want FailedPrecondition, got %v", err)
	}
}

// resultOfAttempt keeps the results of attempt n.
func resultOfAttempt(n uint32) func(*kgo.Record) bool {
	return func(r *kgo.Record) bool {
		var ar hooklinev1.AttemptResult
		return proto.Unmarshal(r.Value, &ar) == nil && ar.GetAttempt() == n
	}
}
