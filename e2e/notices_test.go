package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/kafkatest"
	"github.com/hookline/hookline/sdk/sign"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"google.golang.org/protobuf/encoding/protojson"
)

func TestNoticesArePostedSignedToTheOperatorWebhook(t *testing.T) {
	secret := sign.GenerateSecret()
	got := make(chan *hooklinev1.Notice, 10)
	verify, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	operator := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := verify.Verify(body, r.Header); err != nil {
			t.Errorf("notice signature does not verify: %v", err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var n hooklinev1.Notice
		if err := protojson.Unmarshal(body, &n); err != nil {
			t.Errorf("notice body: %v", err)
		}
		got <- &n
	}))
	defer operator.Close()
	st := startStack(t, func(c *stackConfig) {
		c.dispatcher.FailingAfter = 2
		c.dispatcher.NoticeWebhookURL = operator.URL
		c.dispatcher.NoticeWebhookSecret = secret
	})
	rx := newReceiver(t, http.StatusServiceUnavailable)
	ep := st.createEndpoint(rx.URL)
	st.publish("invoice.paid", `{}`)
	st.publish("invoice.paid", `{}`)
	select {
	case n := <-got:
		if n.GetType() != hooklinev1.NoticeType_NOTICE_TYPE_ENDPOINT_FAILING || n.GetEndpointId() != ep.GetEndpoint().GetId() {
			t.Fatalf("operator got %v, want endpoint.failing for %s", n, ep.GetEndpoint().GetId())
		}
	case <-time.After(waitFor):
		t.Fatal("the operator webhook never got the endpoint.failing notice")
	}
}

func TestManualPauseWritesOnePausedNotice(t *testing.T) {
	st := startStack(t)
	rx := newReceiver(t, http.StatusOK)
	ep := st.createEndpoint(rx.URL)
	for range 2 { // the second pause changes nothing and says nothing
		if _, err := st.endpoints().PauseEndpoint(st.ctx(), &hooklinev1.PauseEndpointRequest{Id: ep.GetEndpoint().GetId(), Reason: "maintenance"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.endpoints().ResumeEndpoint(st.ctx(), &hooklinev1.ResumeEndpointRequest{Id: ep.GetEndpoint().GetId()}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.endpoints().PauseEndpoint(st.ctx(), &hooklinev1.PauseEndpointRequest{Id: ep.GetEndpoint().GetId(), Reason: "again"}); err != nil {
		t.Fatal(err)
	}
	notices := kafkatest.Decode(t, st.readN(st.topics.Notices, 2), func() *hooklinev1.Notice { return &hooklinev1.Notice{} })
	for _, n := range notices {
		if n.GetType() != hooklinev1.NoticeType_NOTICE_TYPE_ENDPOINT_PAUSED || n.GetEndpointId() != ep.GetEndpoint().GetId() {
			t.Fatalf("notice %v, want endpoint.paused for %s", n, ep.GetEndpoint().GetId())
		}
	}
	if notices[0].GetDetail() != "paused by API: maintenance" || notices[1].GetDetail() != "paused by API: again" {
		t.Fatalf("one notice per pause, not per call: %q, %q", notices[0].GetDetail(), notices[1].GetDetail())
	}
}

// TestOutageSpanningADispatcherRestartSendsOneFailingNotice: the endpoint
// fails, its endpoint.failing notice goes out, the dispatcher is replaced
// (as in a deploy or a rebalance) while the endpoint keeps failing, then
// it recovers. The notices are exactly failing, recovered: the new
// dispatcher seeds the endpoint's health from the notices topic instead
// of starting afresh and announcing the same outage again.
func TestOutageSpanningADispatcherRestartSendsOneFailingNotice(t *testing.T) {
	st := startStack(t, func(c *stackConfig) {
		c.dispatcher.FailingAfter = 2
		c.dispatcher.OutageAfter = 0 // every retry is attempted: failures come fast
	})
	var up atomic.Bool
	requests := make(chan struct{}, 100)
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case requests <- struct{}{}:
		default:
		}
		if up.Load() {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer rx.Close()
	st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, RetryPolicy: ladderPolicy(50, 100*time.Millisecond)})
	st.publish("invoice.paid", `{}`)
	first := kafkatest.Decode(t, st.readN(st.topics.Notices, 1), func() *hooklinev1.Notice { return &hooklinev1.Notice{} })[0]
	if first.GetType() != hooklinev1.NoticeType_NOTICE_TYPE_ENDPOINT_FAILING {
		t.Fatalf("first notice %v, want endpoint.failing", first.GetType())
	}

	st.dispatcher.halt()
	for len(requests) > 0 {
		<-requests
	}
	st.dispatcher.start(st, st.newDispatcher(time.Second).Run)
	// Three more failures under the new dispatcher: more than FailingAfter.
	for range 3 {
		select {
		case <-requests:
		case <-st.failed.Done():
			t.Fatal("stack failed")
		case <-time.After(waitFor):
			t.Fatal("the new dispatcher made no attempt")
		}
	}
	up.Store(true)
	notices := kafkatest.Decode(t, st.readN(st.topics.Notices, 2), func() *hooklinev1.Notice { return &hooklinev1.Notice{} })
	if notices[1].GetType() != hooklinev1.NoticeType_NOTICE_TYPE_ENDPOINT_RECOVERED {
		t.Fatalf("notices %v, %v: want failing then recovered, no second failing", notices[0].GetType(), notices[1].GetType())
	}
}
