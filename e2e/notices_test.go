package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/sign"
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
