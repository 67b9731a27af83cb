package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/kafkatest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sessionReceiver answers each lane event by its plan and checks O1 at
// every request, as the dispatcher's sessions come and go: no member of
// a lane is attempted (first attempt or again) before every earlier
// member of its lane had its terminal answer. A 2xx is terminal; a 4xx
// is terminal in a skip lane and blocks a block lane, whose head ends
// only when the operator skips it (end). Attempts made again after an
// aborted commit are allowed (receivers deduplicate on webhook-id).
type sessionReceiver struct {
	mu     sync.Mutex
	plans  map[string][]int // "lane/i" → status codes in order
	block  map[string]bool  // lanes of a block endpoint
	tries  map[string]int
	ended  map[string]bool
	bad    []string
	remain int
	// answered, if set, is called with each answer as it goes out.
	answered func(id string, code int)
}

func newSessionReceiver() *sessionReceiver {
	return &sessionReceiver{plans: map[string][]int{}, block: map[string]bool{}, tries: map[string]int{}, ended: map[string]bool{}}
}

// plan adds member i of lane, answered by codes in turn (the last one
// from then on).
func (rx *sessionReceiver) plan(lane string, i int, codes ...int) laneEvent {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	rx.plans[fmt.Sprint(lane, "/", i)] = codes
	rx.remain++
	return laneEvent{Lane: lane, I: i}
}

func (rx *sessionReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var ev laneEvent
	_ = json.Unmarshal(raw, &ev)
	id := fmt.Sprint(ev.Lane, "/", ev.I)
	rx.mu.Lock()
	for j := range ev.I {
		if !rx.ended[fmt.Sprint(ev.Lane, "/", j)] {
			rx.bad = append(rx.bad, fmt.Sprintf("O1: %s attempted before %s/%d ended", id, ev.Lane, j))
		}
	}
	plan := rx.plans[id]
	code := plan[min(rx.tries[id], len(plan)-1)]
	rx.tries[id]++
	terminal := code < 300 || (code < 500 && !rx.block[ev.Lane])
	if terminal && !rx.ended[id] {
		rx.ended[id] = true
		rx.remain--
	}
	answered := rx.answered
	rx.mu.Unlock()
	if answered != nil {
		answered(id, code)
	}
	w.WriteHeader(code)
}

// end marks a blocked head ended: the operator skipped it.
func (rx *sessionReceiver) end(id string) {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	if !rx.ended[id] {
		rx.ended[id] = true
		rx.remain--
	}
}

func (rx *sessionReceiver) left() int {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	return rx.remain
}

// endTxnFaults answers the dispatcher's commits (EndTxn with commit set,
// of transactional id txn) the way a coordinator out of reach or timing
// out does: REQUEST_TIMED_OUT, leaving the outcome unknown to the
// client. Each armed fault answers the next such commit: notApplied
// without the broker acting on it (the transaction stays open until the
// next session's fence aborts it), applied after the broker committed it
// (through a side connection: the answer is what is lost).
type endTxnFaults struct {
	mu       sync.Mutex
	armed    []bool // applied?
	answered []bool
	failed   []error
}

const (
	notApplied = false
	applied    = true
)

func newEndTxnFaults(t *testing.T, c *kfake.Cluster, txn string) *endTxnFaults {
	t.Helper()
	side, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(side.Close)
	f := &endTxnFaults{}
	c.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.EndTxnRequest)
		f.mu.Lock()
		if r.TransactionalID != txn || !r.Commit || len(f.armed) == 0 {
			f.mu.Unlock()
			return nil, nil, false
		}
		mode := f.armed[0]
		f.armed = f.armed[1:]
		f.mu.Unlock()
		if mode == applied {
			copied := *r
			var err error
			c.SleepControl(func() {
				var resp *kmsg.EndTxnResponse
				if resp, err = copied.RequestWith(context.Background(), side); err == nil {
					err = kerr.ErrorForCode(resp.ErrorCode)
				}
			})
			if err != nil {
				f.mu.Lock()
				f.failed = append(f.failed, err)
				f.mu.Unlock()
			}
		}
		f.mu.Lock()
		f.answered = append(f.answered, mode)
		f.mu.Unlock()
		resp := r.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.RequestTimedOut.Code
		return resp, nil, true
	})
	return f
}

// arm has the next commit answered REQUEST_TIMED_OUT.
func (f *endTxnFaults) arm(mode bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed = append(f.armed, mode)
}

func (f *endTxnFaults) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.answered)
}

// TestAnEndTxnWhoseOutcomeIsUnknownRunsANewSessionThatKeepsLaneOrder:
// the dispatcher's commits are answered REQUEST_TIMED_OUT (a coordinator
// out of reach, a broker outage: the client cannot know how the
// transaction ended), once without the broker acting on it and once
// after it committed, while ordered lanes are mid-way: an endpoint
// ordered per key with transient failures, one ordered per endpoint
// whose head is out on a retry when its commit's answer is lost, and a
// block endpoint whose head is blocked when its commit's answer is lost.
// The dispatcher must not exit; each new session starts from what Kafka
// committed, as a restarted process would: no lane member is attempted
// before the earlier ones ended (O1), the blocked head holds its lane
// until it is skipped (O5), and every delivery has exactly one terminal
// result (I3: nothing committed is written again, nothing aborted is
// lost). On main the dispatcher's Run returned "dispatcher: end
// transaction: REQUEST_TIMED_OUT".
func TestAnEndTxnWhoseOutcomeIsUnknownRunsANewSessionThatKeepsLaneOrder(t *testing.T) {
	st, c := faultyStack(t)
	faults := newEndTxnFaults(t, c, st.kafka.TopicPrefix+"dispatcher-1")
	rx := newSessionReceiver()
	var once [2]sync.Once
	rx.answered = func(id string, code int) {
		switch {
		case id == "X/0" && code == http.StatusBadRequest:
			// The commit that carries the blocked head (its BLOCKED
			// result, its lane record) is not acted on.
			once[0].Do(func() { faults.arm(notApplied) })
		case id == "E/0" && code == http.StatusInternalServerError:
			// The commit that sends the per_endpoint lane's head out on
			// a retry (its retry record, its lane record) commits, but
			// its answer is lost.
			once[1].Do(func() { faults.arm(applied) })
		}
	}
	srv := httptest.NewServer(rx)
	defer srv.Close()
	retry := ladderPolicy(8, 300*time.Millisecond)
	for _, ep := range []*hooklinev1.CreateEndpointRequest{
		{Url: srv.URL + "/per-key", EventTypes: []string{"perkey.changed"}, Ordering: hooklinev1.Ordering_ORDERING_PER_KEY},
		{Url: srv.URL + "/per-endpoint", EventTypes: []string{"perendpoint.changed"}, Ordering: hooklinev1.Ordering_ORDERING_PER_ENDPOINT},
		{Url: srv.URL + "/block", EventTypes: []string{"block.changed"}, Ordering: hooklinev1.Ordering_ORDERING_PER_KEY, OnHeadFailure: hooklinev1.HeadFailure_HEAD_FAILURE_BLOCK},
	} {
		ep.RetryPolicy, ep.OutageModeDisabled = retry, true
		st.createEndpointWith(ep)
	}
	blocking := ""
	ids := map[string]string{}
	publish := func(eventType string, evs ...laneEvent) {
		t.Helper()
		for _, ev := range evs {
			body, _ := json.Marshal(ev)
			resp, err := st.events().PublishEvent(st.ctx(), &hooklinev1.PublishEventRequest{EventType: eventType, Payload: body, OrderingKey: ev.Lane})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.GetDeliveries()) != 1 {
				t.Fatalf("%s %v: %d deliveries, want 1", eventType, ev, len(resp.GetDeliveries()))
			}
			d := resp.GetDeliveries()[0]
			ids[fmt.Sprint(ev.Lane, "/", ev.I)] = d.GetDeliveryId()
			if eventType == "block.changed" {
				blocking = d.GetEndpointId()
			}
		}
	}
	const (
		ok, bad, failing = http.StatusOK, http.StatusBadRequest, http.StatusInternalServerError
	)
	rx.mu.Lock()
	rx.block["X"], rx.block["Y"] = true, true
	rx.mu.Unlock()
	// Session one: lanes per key (one with a skipped head failure), and
	// a block lane whose head blocks.
	publish("block.changed", rx.plan("X", 0, bad), rx.plan("Y", 0, ok))
	publish("perkey.changed", rx.plan("P0", 0, failing, ok), rx.plan("P1", 0, ok), rx.plan("P2", 0, ok))
	publish("block.changed", rx.plan("X", 1, ok), rx.plan("Y", 1, failing, ok))
	publish("perkey.changed", rx.plan("P0", 1, ok), rx.plan("P1", 1, failing, failing, ok), rx.plan("P2", 1, bad),
		rx.plan("P0", 2, ok), rx.plan("P2", 2, ok), rx.plan("P1", 2, ok))
	publish("block.changed", rx.plan("X", 2, ok), rx.plan("Y", 2, ok))
	st.until("the commit after the blocked head answered REQUEST_TIMED_OUT", func() bool { return faults.count() >= 1 })
	// Session two: a lane per endpoint, whose head goes out on a retry
	// in the commit whose answer is lost.
	publish("perendpoint.changed", rx.plan("E", 0, failing, ok), rx.plan("E", 1, ok), rx.plan("E", 2, failing, ok), rx.plan("E", 3, ok))
	st.until("the commit after the per_endpoint head's retry answered REQUEST_TIMED_OUT", func() bool { return faults.count() >= 2 })
	// Session three: everything but the blocked lane ends; the blocked
	// head holds X until it is skipped.
	st.until("every lane but the blocked one ended", func() bool { return rx.left() == 3 })
	st.until("lane X listed blocked", func() bool {
		l, err := st.lanes().ListBlockedLanes(st.ctx(), &hooklinev1.ListBlockedLanesRequest{EndpointId: blocking})
		return err == nil && len(l.GetLanes()) == 1 && l.GetLanes()[0].GetDeliveryId() == ids["X/0"]
	})
	rx.end("X/0")
	if _, err := st.lanes().SkipLaneHead(st.ctx(), &hooklinev1.SkipLaneHeadRequest{EndpointId: blocking, OrderingKey: "X", DeliveryId: ids["X/0"]}); err != nil {
		t.Fatal(err)
	}
	st.until("every lane ended", func() bool { return rx.left() == 0 })

	st.terminalResults(len(ids))
	states := st.resultsByDelivery(t)
	rx.mu.Lock()
	defer rx.mu.Unlock()
	for _, b := range rx.bad {
		t.Error(b)
	}
	faults.mu.Lock()
	for _, err := range faults.failed {
		t.Errorf("the commit whose answer was to be lost did not commit: %v", err)
	}
	faults.mu.Unlock()
	for name, id := range ids {
		if n := rx.tries[name]; n < len(rx.plans[name]) {
			t.Errorf("%s answered %d times, planned %d", name, n, len(rx.plans[name]))
		}
		terminal := 0
		for _, s := range states[id] {
			switch s {
			case hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED, hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, hooklinev1.DeliveryState_DELIVERY_STATE_EXPIRED:
				terminal++
			}
		}
		if terminal != 1 {
			t.Errorf("%s: results %v; want exactly one terminal result", name, states[id])
		}
	}
	if got := fmt.Sprint(states[ids["X/0"]]); got != "[DELIVERY_STATE_FAILED DELIVERY_STATE_BLOCKED]" {
		t.Errorf("the blocked head's results %s; want blocked once, then failed (skipped)", got)
	}
}

// resultsByDelivery reads every committed result, by delivery id, each
// delivery's states sorted.
func (st *stack) resultsByDelivery(t *testing.T) map[string][]hooklinev1.DeliveryState {
	t.Helper()
	recs, err := hkafka.ReadAll(st.failed, st.kafka, st.topics.Results)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]hooklinev1.DeliveryState{}
	for _, r := range kafkatest.Decode(t, recs, newResult) {
		out[r.GetDeliveryId()] = append(out[r.GetDeliveryId()], r.GetState())
	}
	for _, s := range out {
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	}
	return out
}
