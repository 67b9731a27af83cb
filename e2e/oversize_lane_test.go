package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
)

// bodyCounter answers 200 and counts the POSTs per path and body.
type bodyCounter struct {
	mu    sync.Mutex
	posts map[string]int
	total int
}

func (rx *bodyCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	rx.mu.Lock()
	rx.posts[r.URL.Path+" "+string(raw)]++
	rx.total++
	rx.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (rx *bodyCounter) counts() (distinct, total int) {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	return len(rx.posts), rx.total
}

// TestAHeadNearThePayloadLimitBlocksItsLaneOnlyOnce (issue 24 item 1):
// an endpoint ordered per_endpoint with on_head_failure block, whose
// head carries a payload of about 1 MiB (under ingest's limit) and is
// answered 400. Its block must be committed once — the lane keeps a
// reference to the head, not its payload, so the lanes record is small —
// and ListBlockedLanes lists it; healthy endpoints sharing the
// partitions get each delivery POSTed exactly once (no aborted commit
// re-POSTs them). A resend reads the head's payload back by reference.
func TestAHeadNearThePayloadLimitBlocksItsLaneOnlyOnce(t *testing.T) {
	st := startStack(t)
	rx := &blockReceiver{codes: map[string]int{"H/0": http.StatusBadRequest}, delivered: map[string][]int{}, attempts: map[string]int{}}
	srv := httptest.NewServer(rx)
	defer srv.Close()
	blocked := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: srv.URL + "/hooks", Ordering: hooklinev1.Ordering_ORDERING_PER_ENDPOINT,
		OnHeadFailure: hooklinev1.HeadFailure_HEAD_FAILURE_BLOCK, RetryPolicy: ladderPolicy(3, time.Second), OutageModeDisabled: true, EventTypes: []string{"order.*"}}).GetEndpoint()
	healthy := &bodyCounter{posts: map[string]int{}}
	hsrv := httptest.NewServer(healthy)
	defer hsrv.Close()
	for i := range 6 {
		st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: fmt.Sprint(hsrv.URL, "/hooks/", i), EventTypes: []string{"healthy.*"}})
	}

	const size = 1_048_500
	head := fmt.Sprintf(`{"lane":"H","i":0,"pad":"%s"}`, strings.Repeat("x", size-len(`{"lane":"H","i":0,"pad":""}`)))
	resp, err := st.events().PublishEvent(st.ctx(), &hooklinev1.PublishEventRequest{EventType: "order.updated", Payload: []byte(head)})
	if err != nil {
		t.Fatal(err)
	}
	headID := resp.GetDeliveries()[0].GetDeliveryId()
	const events = 40
	for i := range events {
		body, _ := json.Marshal(laneEvent{"ok", i})
		if _, err := st.events().PublishEvent(st.ctx(), &hooklinev1.PublishEventRequest{EventType: "healthy.ev", Payload: body}); err != nil {
			t.Fatal(err)
		}
	}
	const deliveries = 6 * events
	st.until("every healthy delivery POSTed", func() bool { d, _ := healthy.counts(); return d == deliveries })
	st.until("the head's lane listed blocked", func() bool {
		l, err := st.lanes().ListBlockedLanes(st.ctx(), &hooklinev1.ListBlockedLanesRequest{EndpointId: blocked.GetId()})
		if err != nil {
			t.Fatal(err)
		}
		return len(l.GetLanes()) == 1 && l.GetLanes()[0].GetDeliveryId() == headID
	})
	rx.mu.Lock()
	attempts := rx.attempts["H/0"]
	rx.mu.Unlock()
	if _, total := healthy.counts(); attempts != 1 || total != deliveries {
		t.Fatalf("the head was attempted %d times and healthy endpoints got %d POSTs for %d deliveries; want 1 and %d", attempts, total, deliveries, deliveries)
	}

	// The operator fixes the receiver and resends: the head comes with
	// its whole payload, read back by reference.
	rx.set("H/0", http.StatusOK)
	if _, err := st.lanes().ResendLaneHead(st.ctx(), &hooklinev1.ResendLaneHeadRequest{EndpointId: blocked.GetId(), DeliveryId: headID}); err != nil {
		t.Fatal(err)
	}
	st.until("the head delivered after its resend", func() bool { return fmt.Sprint(rx.lane("H")) == "[0]" })
}
