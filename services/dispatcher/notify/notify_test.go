package notify

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/netguard"
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
