package notify

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/netguard"
	"github.com/hookline/hookline/sdk/sign"
	"github.com/hookline/hookline/services/dispatcher/attempt"
)

// TestA4xxFromTheOperatorWebhookIsRetriedNotDropped: the operator webhook
// answers 400, then 401, then 200: the notice is posted until it is taken
// (at least once), backing off between tries, and forward reports it
// done only then.
func TestA4xxFromTheOperatorWebhookIsRetriedNotDropped(t *testing.T) {
	answers := []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusOK}
	var (
		mu  sync.Mutex
		ids []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		ids = append(ids, r.Header.Get("webhook-id"))
		code := answers[min(len(ids), len(answers))-1]
		mu.Unlock()
		w.WriteHeader(code)
	}))
	defer srv.Close()

	guard, err := netguard.NewPolicy(true, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	n, err := New(hkafka.Config{}, "g", srv.URL, "whsec_"+"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", attempt.New(guard),
		slog.New(slog.DiscardHandler), rand.New(rand.NewPCG(1, 2)),
		WithWait(func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }))
	if err != nil {
		t.Fatal(err)
	}
	r, err := hkafka.Record("notices", "ep_1", &hooklinev1.Notice{NoticeId: "ntc_1", Type: hooklinev1.NoticeType_NOTICE_TYPE_ENDPOINT_FAILING, EndpointId: "ep_1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.forward(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 3 || ids[0] != "ntc_1" || ids[2] != "ntc_1" {
		t.Fatalf("webhook got %v, want the notice 3 times (400, 401, then taken)", ids)
	}
	if len(waits) != 2 || waits[0] <= 0 || waits[1] <= 0 {
		t.Fatalf("waits %v, want a backoff before each of the 2 retries", waits)
	}
}

// TestTransformationFailingNoticeIsPostedLikeTheOthers: an
// endpoint.transformation_failing notice reaches the operator webhook as
// any notice does, signed, its body naming the type, the error and the
// failed delivery.
func TestTransformationFailingNoticeIsPostedLikeTheOthers(t *testing.T) {
	secret := "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	got := make(chan *http.Request, 1)
	bodies := make(chan []byte, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r
		bodies <- b
	}))
	defer srv.Close()
	guard, err := netguard.NewPolicy(true, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(hkafka.Config{}, "g", srv.URL, secret, attempt.New(guard), slog.New(slog.DiscardHandler), rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	r, err := hkafka.Record("notices", "ep_1", &hooklinev1.Notice{NoticeId: "ntc_2", Type: hooklinev1.NoticeType_NOTICE_TYPE_TRANSFORMATION_FAILING,
		EndpointId: "ep_1", Detail: "transformation threw: Error: no customer", DeliveryId: "dlv_1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.forward(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	req, body := <-got, <-bodies
	v, err := sign.NewVerifier(secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(req.Header.Get(sign.HeaderID), req.Header.Get(sign.HeaderTimestamp), req.Header.Get(sign.HeaderSignature), body, time.Now(), time.Minute); err != nil {
		t.Fatalf("notice signature does not verify: %v", err)
	}
	for _, want := range []string{`"NOTICE_TYPE_TRANSFORMATION_FAILING"`, `no customer`, `"dlv_1"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("notice body %s lacks %s", body, want)
		}
	}
}
