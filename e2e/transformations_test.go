package e2e

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/kafkatest"
	rxlib "github.com/hookline/hookline/sdk/receiver"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestTransformationReshapesPayloadAndAddsHeader: an endpoint's
// transformation reshapes the payload and adds a header; the receiver
// (sdk/receiver, which verifies the signature) gets the transformed body,
// signed as sent, with the header.
func TestTransformationReshapesPayloadAndAddsHeader(t *testing.T) {
	st := startStack(t)
	got := make(chan rxlib.Event, 1)
	var rcv *rxlib.Receiver
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { rcv.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	ep := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: srv.URL, Transformation: `function handler(w) {
		w.payload = {total: w.payload.amount / 100, currency: w.payload.currency.toLowerCase()};
		w.headers["x-shape"] = "v2";
		return w;
	}`})
	var err error
	rcv, err = rxlib.New(func(_ context.Context, ev rxlib.Event) error {
		select {
		case got <- ev:
		default:
		}
		return nil
	}, []string{ep.GetSecret()})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- rcv.Run(rctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-ran; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("receiver: %v", err)
		}
	})
	pub := st.publish("invoice.paid", `{"amount": 4200, "currency": "EUR"}`)
	st.deliveredAll(1)
	var ev rxlib.Event
	select {
	case ev = <-got:
	case <-time.After(waitFor):
		t.Fatal("receiver verified no webhook")
	}
	if want := `{"total":42,"currency":"eur"}`; string(ev.Body) != want {
		t.Errorf("receiver got %s, want %s", ev.Body, want)
	}
	if h := ev.Header.Get("X-Shape"); h != "v2" {
		t.Errorf("x-shape = %q, want v2", h)
	}
	if ev.ID != pub.GetEventId() {
		t.Errorf("webhook-id = %s, want the event id %s", ev.ID, pub.GetEventId())
	}
}

// TestTransformationCancelEndsCancelled: a handler that returns
// {cancel: true} ends the delivery CANCELLED, with no attempt made.
func TestTransformationCancelEndsCancelled(t *testing.T) {
	st := startStack(t)
	rx := newReceiver(t, http.StatusOK)
	st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, Transformation: `function handler(w) { return {cancel: w.payload.amount < 100} }`})
	pub := st.publish("invoice.paid", `{"amount": 5}`)
	res := kafkatest.Decode(t, st.readN(st.topics.Results, 1), newResult)
	if res[0].GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_CANCELLED || res[0].GetDeliveryId() != pub.GetDeliveries()[0].GetDeliveryId() {
		t.Fatalf("result = %v, want CANCELLED for %s", res[0], pub.GetDeliveries()[0].GetDeliveryId())
	}
	if n := len(rx.got()); n != 0 {
		t.Fatalf("receiver got %d posts for a cancelled delivery", n)
	}
}

// TestFailingTransformationsEndFailedAndSpareOtherEndpoints: a handler
// that throws, one that loops forever (stopped by the time limit) and one
// that returns 10 MB each end their delivery FAILED with the error and a
// dead letter; another endpoint of the same event is delivered as usual.
// Two events, two failures each: one endpoint.transformation_failing
// notice per failing endpoint, naming the first failed delivery.
func TestFailingTransformationsEndFailedAndSpareOtherEndpoints(t *testing.T) {
	st := startStack(t)
	rx := newReceiver(t, http.StatusOK)
	scripts := map[string]string{
		"throws": `function handler(w) { throw new Error("no customer") }`,
		"loops":  `function handler(w) { for (;;) {} }`,
		"10 MB":  `function handler(w) { w.payload = "x".repeat(10 * 1024 * 1024); return w }`,
		"plain":  ``,
	}
	byEndpoint := map[string]string{}
	for name, src := range scripts {
		id := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, Transformation: src}).GetEndpoint().GetId()
		byEndpoint[id] = name
	}
	first := st.publish("invoice.paid", `{"amount": 5}`)
	results := kafkatest.Decode(t, st.readN(st.topics.Results, len(scripts)), newResult)
	for _, r := range results {
		name := byEndpoint[r.GetEndpointId()]
		want := hooklinev1.DeliveryState_DELIVERY_STATE_FAILED
		if name == "plain" {
			want = hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED
		}
		if r.GetState() != want {
			t.Errorf("%s: result %v, want %v", name, r, want)
		}
		if name != "plain" && !strings.Contains(r.GetReason(), "transformation") {
			t.Errorf("%s: reason %q does not name the transformation", name, r.GetReason())
		}
	}
	dead := kafkatest.Decode(t, st.readN(st.topics.Dead, len(scripts)-1), func() *hooklinev1.DeadLetter { return &hooklinev1.DeadLetter{} })
	for _, d := range dead {
		if byEndpoint[d.GetDelivery().GetEndpointId()] == "plain" {
			t.Errorf("the plain endpoint's delivery was dead-lettered: %v", d)
		}
	}
	if n := len(rx.got()); n != 1 {
		t.Fatalf("receiver got %d posts, want 1 (the plain endpoint's)", n)
	}

	// A second failure per endpoint: its result is committed with any
	// notice it calls for, so once the results are read every notice is.
	st.publish("invoice.paid", `{"amount": 6}`)
	st.readN(st.topics.Results, 2*len(scripts))
	firstDelivery := map[string]string{}
	for _, d := range first.GetDeliveries() {
		firstDelivery[d.GetEndpointId()] = d.GetDeliveryId()
	}
	st.readN(st.topics.Notices, len(scripts)-1)
	notices := kafkatest.Decode(t, st.readFor(st.topics.Notices, time.Second), func() *hooklinev1.Notice { return &hooklinev1.Notice{} })
	perEndpoint := map[string]int{}
	for _, n := range notices {
		name := byEndpoint[n.GetEndpointId()]
		if n.GetType() != hooklinev1.NoticeType_NOTICE_TYPE_TRANSFORMATION_FAILING || name == "plain" {
			t.Errorf("unexpected notice %v", n)
			continue
		}
		perEndpoint[name]++
		if n.GetDeliveryId() != firstDelivery[n.GetEndpointId()] || !strings.Contains(n.GetDetail(), "transformation") {
			t.Errorf("%s: notice %v; want the first failed delivery %s and the error", name, n, firstDelivery[n.GetEndpointId()])
		}
	}
	for _, name := range []string{"throws", "loops", "10 MB"} {
		if perEndpoint[name] != 1 {
			t.Errorf("%s: %d transformation_failing notices for two failures, want 1", name, perEndpoint[name])
		}
	}
}

// TestBadTransformationIsRefused: a script that does not compile or has
// no handler is INVALID_ARGUMENT at create.
func TestBadTransformationIsRefused(t *testing.T) {
	st := startStack(t)
	rx := newReceiver(t, http.StatusOK)
	for _, give := range []string{`function handler(w) { return w`, `function other(w) { return w }`} {
		_, err := st.endpoints().CreateEndpoint(st.ctx(), &hooklinev1.CreateEndpointRequest{Url: rx.URL, Transformation: give})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "transformation") {
			t.Errorf("create with %q: %v; want INVALID_ARGUMENT naming the transformation", give, err)
		}
	}
}

// TestTransformationTryRunsAScriptAgainstASampleEvent:
// TestFilterAndTransformation runs a script given, or an endpoint's own
// with its url, on a sample event whatever the filter decided, and
// answers the webhook it returned, a cancel, or the error, with the time
// taken; a script that does not compile is INVALID_ARGUMENT. It writes
// nothing.
func TestTransformationTryRunsAScriptAgainstASampleEvent(t *testing.T) {
	st := startStack(t)
	rx := newReceiver(t, http.StatusOK)
	ep := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, Filter: `payload.amount > 1000`, Transformation: `function handler(w) {
		w.payload = {text: "paid " + w.payload.amount};
		w.headers["x-shape"] = "slack";
		w.method = "PUT";
		return w;
	}`}).GetEndpoint()
	sample := func(script, endpoint string) *hooklinev1.TestFilterAndTransformationRequest {
		return &hooklinev1.TestFilterAndTransformationRequest{Transformation: script, EndpointId: endpoint, EventType: "invoice.paid", Payload: []byte(`{"amount": 15}`)}
	}
	resp, err := st.endpoints().TestFilterAndTransformation(st.ctx(), sample("", ep.GetId()))
	if err != nil {
		t.Fatal(err)
	}
	w := resp.GetTransformation().GetWebhook()
	if resp.GetFilter().GetMatched() || resp.GetTransformation().GetDuration() == nil ||
		string(w.GetPayload()) != `{"text":"paid 15"}` || w.GetMethod() != "PUT" || w.GetUrl() != rx.URL || w.GetHeaders()["x-shape"] != "slack" {
		t.Fatalf("the endpoint's script: %v; want no match, and the reshaped webhook to %s with a duration", resp, rx.URL)
	}
	tests := []struct {
		name, give, wantErr string
		wantCancel          bool
	}{
		{"cancel", `function handler(w) { return {cancel: true} }`, "", true},
		{"throw", `function handler(w) { throw new Error("no customer") }`, "no customer", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := st.endpoints().TestFilterAndTransformation(st.ctx(), sample(tt.give, ""))
			if err != nil {
				t.Fatal(err)
			}
			tr := resp.GetTransformation()
			if resp.GetFilter() != nil || tr.GetCancelled() != tt.wantCancel || !strings.Contains(tr.GetError(), tt.wantErr) || (tt.wantErr == "") != (tr.GetError() == "") || tr.GetWebhook() != nil || tr.GetDuration() == nil {
				t.Fatalf("got %v; want cancelled %v, error %q, no webhook, a duration", resp, tt.wantCancel, tt.wantErr)
			}
		})
	}
	_, err = st.endpoints().TestFilterAndTransformation(st.ctx(), sample(`function handler(w) { return w`, ""))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "transformation does not compile") {
		t.Fatalf("a bad script: %v; want INVALID_ARGUMENT with goja's message", err)
	}
	code, out := st.httpCall("POST", "/v1/endpoints:testFilterAndTransformation", st.apiKey,
		`{"transformation": "function handler(w) { w.eventType = 'x.y'; return w }", "event_type": "invoice.paid", "payload": {"amount": 2000}}`)
	if tr, _ := out["transformation"].(map[string]any); code != http.StatusOK || tr["webhook"] == nil {
		t.Fatalf("POST /v1/endpoints:testFilterAndTransformation = %d %v; want a webhook", code, out)
	}
	if n := st.endOffsets(st.topics.Deliveries); n != 0 {
		t.Fatalf("trying transformations wrote %d deliveries", n)
	}
}
