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
	st.publish("invoice.paid", `{"amount": 5}`)
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
