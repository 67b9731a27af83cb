package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/kafkatest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// blockReceiver answers each lane event with the code set for it (200
// when none) and records, per lane, the events it answered 2xx in order.
type blockReceiver struct {
	mu        sync.Mutex
	codes     map[string]int // "lane/i" → status
	delivered map[string][]int
	attempts  map[string]int
}

func (rx *blockReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var ev laneEvent
	_ = json.Unmarshal(raw, &ev)
	id := fmt.Sprint(ev.Lane, "/", ev.I)
	rx.mu.Lock()
	rx.attempts[id]++
	code, ok := rx.codes[id]
	if !ok {
		code = http.StatusOK
	}
	if code == http.StatusOK {
		rx.delivered[ev.Lane] = append(rx.delivered[ev.Lane], ev.I)
	}
	rx.mu.Unlock()
	w.WriteHeader(code)
}

func (rx *blockReceiver) set(id string, code int) {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	rx.codes[id] = code
}

func (rx *blockReceiver) lane(l string) []int {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	return slices.Clone(rx.delivered[l])
}

// until polls cond every 50 ms until it holds or waitFor passes.
func (st *stack) until(what string, cond func() bool) {
	st.t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(waitFor)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			st.t.Fatalf("not within %v: %s", waitFor, what)
		case <-st.failed.Done():
			st.t.Fatalf("a service failed while waiting for: %s", what)
		}
	}
}

func (st *stack) lanes() hooklinev1.LaneServiceClient {
	return hooklinev1.NewLaneServiceClient(st.conn)
}

// TestBlockedLaneHoldsUntilAnOperatorResendsOrSkips: an endpoint ordered
// per key with on_head_failure block. The heads of lanes A and C fail
// permanently: each lane blocks (a BLOCKED result, a lane.blocked
// notice, listed by ListBlockedLanes with its reason and status) while
// lane B is delivered. A stale skip is refused. The operator fixes A's
// receiver and resends A's head: A is delivered in order, head first;
// skips C's head: it is dead-lettered and C's follower goes. The
// dispatcher is replaced while the lanes are blocked.
func TestBlockedLaneHoldsUntilAnOperatorResendsOrSkips(t *testing.T) {
	st := startStack(t, func(c *stackConfig) { c.dispatcher.StuckAfter = 300 * time.Millisecond })
	rx := &blockReceiver{codes: map[string]int{"A/0": http.StatusBadRequest, "C/0": http.StatusGone}, delivered: map[string][]int{}, attempts: map[string]int{}}
	srv := httptest.NewServer(rx)
	defer srv.Close()
	ep := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: srv.URL + "/hooks", Ordering: hooklinev1.Ordering_ORDERING_PER_KEY,
		OnHeadFailure: hooklinev1.HeadFailure_HEAD_FAILURE_BLOCK, RetryPolicy: ladderPolicy(8, time.Second), OutageModeDisabled: true}).GetEndpoint()
	if ep.GetOnHeadFailure() != hooklinev1.HeadFailure_HEAD_FAILURE_BLOCK {
		t.Fatalf("on_head_failure %v", ep.GetOnHeadFailure())
	}
	ids := map[string]string{}
	for _, ev := range []laneEvent{{"A", 0}, {"A", 1}, {"B", 0}, {"C", 0}, {"C", 1}, {"A", 2}, {"B", 1}} {
		body, _ := json.Marshal(ev)
		resp, err := st.events().PublishEvent(st.ctx(), &hooklinev1.PublishEventRequest{EventType: "order.updated", Payload: body, OrderingKey: ev.Lane})
		if err != nil {
			t.Fatal(err)
		}
		ids[fmt.Sprint(ev.Lane, "/", ev.I)] = resp.GetDeliveries()[0].GetDeliveryId()
	}
	st.until("lane B delivered", func() bool { return fmt.Sprint(rx.lane("B")) == "[0 1]" })

	var blocked *hooklinev1.ListBlockedLanesResponse
	st.until("lanes A and C listed blocked", func() bool {
		var err error
		blocked, err = st.lanes().ListBlockedLanes(st.ctx(), &hooklinev1.ListBlockedLanesRequest{EndpointId: ep.GetId()})
		if err != nil {
			t.Fatal(err)
		}
		return len(blocked.GetLanes()) == 2
	})
	a, c := blocked.GetLanes()[0], blocked.GetLanes()[1]
	if a.GetOrderingKey() != "A" || a.GetDeliveryId() != ids["A/0"] || a.GetLastStatusCode() != http.StatusBadRequest ||
		a.GetLastClass() != hooklinev1.OutcomeClass_OUTCOME_CLASS_PERMANENT || a.GetReason() == "" || a.GetBlockedSince() == nil || a.GetEventId() == "" {
		t.Fatalf("lane A listed as %v; want its head, HTTP 400, permanent, a reason", a)
	}
	if c.GetOrderingKey() != "C" || c.GetDeliveryId() != ids["C/0"] || c.GetLastStatusCode() != http.StatusGone {
		t.Fatalf("lane C listed as %v", c)
	}
	// One page at a time.
	page, err := st.lanes().ListBlockedLanes(st.ctx(), &hooklinev1.ListBlockedLanesRequest{EndpointId: ep.GetId(), PageSize: 1})
	if err != nil || len(page.GetLanes()) != 1 || page.GetNextPageToken() == "" {
		t.Fatalf("first page %v, %v", page, err)
	}
	page, err = st.lanes().ListBlockedLanes(st.ctx(), &hooklinev1.ListBlockedLanesRequest{EndpointId: ep.GetId(), PageSize: 1, PageToken: page.GetNextPageToken()})
	if err != nil || len(page.GetLanes()) != 1 || page.GetLanes()[0].GetOrderingKey() != "C" {
		t.Fatalf("second page %v, %v", page, err)
	}

	// The same over HTTP/JSON.
	if code, body := st.httpCall("GET", "/v1/endpoints/"+ep.GetId()+"/blockedLanes", st.apiKey, ""); code != http.StatusOK || len(body["lanes"].([]any)) != 2 {
		t.Fatalf("GET blockedLanes = %d %v", code, body)
	}
	if code, body := st.httpCall("POST", "/v1/endpoints/"+ep.GetId()+"/blockedLanes:skip", st.apiKey,
		`{"ordering_key":"A","delivery_id":"`+ids["A/2"]+`"}`); code != http.StatusBadRequest {
		t.Fatalf("POST blockedLanes:skip naming a follower = %d %v; want 400 (FAILED_PRECONDITION)", code, body)
	}

	var notices []*hooklinev1.Notice
	for _, n := range kafkatest.Decode(t, st.readN(st.topics.Notices, 2), func() *hooklinev1.Notice { return &hooklinev1.Notice{} }) {
		if n.GetType() == hooklinev1.NoticeType_NOTICE_TYPE_LANE_BLOCKED {
			notices = append(notices, n)
		}
	}
	slices.SortFunc(notices, func(x, y *hooklinev1.Notice) int { return strings.Compare(x.GetOrderingKey(), y.GetOrderingKey()) })
	if len(notices) != 2 || notices[0].GetDeliveryId() != ids["A/0"] || notices[1].GetDeliveryId() != ids["C/0"] || notices[0].GetEndpointId() != ep.GetId() {
		t.Fatalf("lane.blocked notices %v; want one for A's head and one for C's", notices)
	}
	if got := rx.lane("A"); len(got) != 0 {
		t.Fatalf("lane A delivered %v while blocked", got)
	}

	// The dispatcher is replaced while the lanes are blocked: the new
	// one learns from the lanes topic that A and C are blocked (A's
	// followers, read again or back from the retry path, must not go
	// first: the order check below).
	st.dispatcher.halt()
	st.dispatcher.start(st, st.newDispatcher(time.Millisecond).Run)

	// A stale command (not the head) is refused and writes nothing.
	before := st.endOffsets(st.topics.Deliveries)
	_, err = st.lanes().SkipLaneHead(st.ctx(), &hooklinev1.SkipLaneHeadRequest{EndpointId: ep.GetId(), OrderingKey: "A", DeliveryId: ids["A/1"]})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("skip of a delivery that is not the head: %v; want FAILED_PRECONDITION", err)
	}
	if _, err := st.lanes().ResendLaneHead(st.ctx(), &hooklinev1.ResendLaneHeadRequest{EndpointId: ep.GetId(), OrderingKey: "B", DeliveryId: ids["B/0"]}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("resend on a lane that is not blocked: %v; want FAILED_PRECONDITION", err)
	}
	if after := st.endOffsets(st.topics.Deliveries); after != before {
		t.Fatalf("refused commands wrote %d records", after-before)
	}

	rx.set("A/0", http.StatusOK) // the receiver was fixed
	if _, err := st.lanes().ResendLaneHead(st.ctx(), &hooklinev1.ResendLaneHeadRequest{EndpointId: ep.GetId(), OrderingKey: "A", DeliveryId: ids["A/0"]}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.lanes().SkipLaneHead(st.ctx(), &hooklinev1.SkipLaneHeadRequest{EndpointId: ep.GetId(), OrderingKey: "C", DeliveryId: ids["C/0"]}); err != nil {
		t.Fatal(err)
	}
	st.until("lane A delivered in order and C's follower", func() bool {
		return fmt.Sprint(rx.lane("A")) == "[0 1 2]" && fmt.Sprint(rx.lane("C")) == "[1]"
	})
	results := st.terminalResults(7)
	states := map[string][]hooklinev1.DeliveryState{}
	for _, r := range results {
		states[r.GetDeliveryId()] = append(states[r.GetDeliveryId()], r.GetState())
	}
	if got := fmt.Sprint(states[ids["A/0"]]); got != "[DELIVERY_STATE_BLOCKED DELIVERY_STATE_DELIVERED]" {
		t.Errorf("A's head: results %s; want blocked, then delivered", got)
	}
	if got := fmt.Sprint(states[ids["C/0"]]); got != "[DELIVERY_STATE_BLOCKED DELIVERY_STATE_FAILED]" {
		t.Errorf("C's head: results %s; want blocked, then failed (skipped)", got)
	}
	dead := kafkatest.Decode(t, st.readN(st.topics.Dead, 1), func() *hooklinev1.DeadLetter { return &hooklinev1.DeadLetter{} })
	if len(dead) != 1 || dead[0].GetDelivery().GetDeliveryId() != ids["C/0"] {
		t.Errorf("dead letters %v; want C's skipped head only", dead)
	}
	st.until("no lane blocked", func() bool {
		l, err := st.lanes().ListBlockedLanes(st.ctx(), &hooklinev1.ListBlockedLanesRequest{EndpointId: ep.GetId()})
		return err == nil && len(l.GetLanes()) == 0
	})
}

// TestLaneServiceRefusesBadInputClearlyAndWritesNothing: each bad
// request gets the status and a message naming what to fix, and no
// command is written.
func TestLaneServiceRefusesBadInputClearlyAndWritesNothing(t *testing.T) {
	st := startStack(t)
	rx := newReceiver(t, http.StatusOK)
	ep := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, Ordering: hooklinev1.Ordering_ORDERING_PER_KEY,
		OnHeadFailure: hooklinev1.HeadFailure_HEAD_FAILURE_BLOCK}).GetEndpoint()
	if _, err := st.endpoints().PauseEndpoint(st.ctx(), &hooklinev1.PauseEndpointRequest{Id: ep.GetId()}); err != nil {
		t.Fatal(err)
	}
	dlv := "dlv_01jzzzzzzzzzzzzzzzzzzzzzzz"
	before := st.endOffsets(st.topics.Deliveries)
	tests := []struct {
		name string
		call func() error
		code codes.Code
		says string
	}{
		{"list without an endpoint", func() error {
			_, err := st.lanes().ListBlockedLanes(st.ctx(), &hooklinev1.ListBlockedLanesRequest{})
			return err
		}, codes.InvalidArgument, "endpoint_id"},
		{"list with a huge page", func() error {
			_, err := st.lanes().ListBlockedLanes(st.ctx(), &hooklinev1.ListBlockedLanesRequest{EndpointId: ep.GetId(), PageSize: 5000})
			return err
		}, codes.InvalidArgument, "page_size"},
		{"list with a forged page token", func() error {
			_, err := st.lanes().ListBlockedLanes(st.ctx(), &hooklinev1.ListBlockedLanesRequest{EndpointId: ep.GetId(), PageToken: "abc"})
			return err
		}, codes.InvalidArgument, "page_token"},
		{"skip without a delivery", func() error {
			_, err := st.lanes().SkipLaneHead(st.ctx(), &hooklinev1.SkipLaneHeadRequest{EndpointId: ep.GetId(), OrderingKey: "a"})
			return err
		}, codes.InvalidArgument, "delivery_id"},
		{"skip naming an event", func() error {
			_, err := st.lanes().SkipLaneHead(st.ctx(), &hooklinev1.SkipLaneHeadRequest{EndpointId: ep.GetId(), DeliveryId: "evt_01jzzzzzzzzzzzzzzzzzzzzzzz"})
			return err
		}, codes.InvalidArgument, "delivery_id"},
		{"skip with a control byte in the key", func() error {
			_, err := st.lanes().SkipLaneHead(st.ctx(), &hooklinev1.SkipLaneHeadRequest{EndpointId: ep.GetId(), OrderingKey: "a\n", DeliveryId: dlv})
			return err
		}, codes.InvalidArgument, "ordering_key"},
		{"skip on an unknown endpoint", func() error {
			_, err := st.lanes().SkipLaneHead(st.ctx(), &hooklinev1.SkipLaneHeadRequest{EndpointId: "ep_01jzzzzzzzzzzzzzzzzzzzzzzz", DeliveryId: dlv})
			return err
		}, codes.NotFound, "ep_01jzzzzzzzzzzzzzzzzzzzzzzz"},
		{"skip on a lane that is not blocked", func() error {
			_, err := st.lanes().SkipLaneHead(st.ctx(), &hooklinev1.SkipLaneHeadRequest{EndpointId: ep.GetId(), OrderingKey: "a", DeliveryId: dlv})
			return err
		}, codes.FailedPrecondition, "not blocked"},
		{"resend while paused", func() error {
			_, err := st.lanes().ResendLaneHead(st.ctx(), &hooklinev1.ResendLaneHeadRequest{EndpointId: ep.GetId(), OrderingKey: "a", DeliveryId: dlv})
			return err
		}, codes.FailedPrecondition, "paused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if status.Code(err) != tt.code || !strings.Contains(status.Convert(err).Message(), tt.says) {
				t.Fatalf("got %v; want %v saying %q", err, tt.code, tt.says)
			}
		})
	}
	if after := st.endOffsets(st.topics.Deliveries); after != before {
		t.Fatalf("refused calls wrote %d records", after-before)
	}
}
