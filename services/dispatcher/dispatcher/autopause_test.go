package dispatcher

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/sdk/sign"
	"github.com/hookline/hookline/services/dispatcher/attempt"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
)

// TestAnAutomaticPauseDroppedBeforeItsCommitReArmsTheEndpoint: the
// attempt that reached the auto-pause threshold is done, its pause
// among its outputs, when its partition is revoked (or the window
// rewound after an abort) before a commit wrote it: the pause never
// happened, so its tracking is forgotten and the endpoint re-armed —
// the next permanent failure pauses it (R-RECV-4).
func TestAnAutomaticPauseDroppedBeforeItsCommitReArmsTheEndpoint(t *testing.T) {
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadRequest) }))
	defer rx.Close()
	s := newTestService(t)
	s.cfg.AutoPauseAfter = 1
	s.store.Put(endpoint(rx.URL, sign.GenerateSecret()))
	e := testEngine(t, s)

	e.pollID(t, 0, 0, "dlv_0")
	e.pump(s.now())
	e.waitOutstanding(t, 0)
	en := e.w.parts[tp{s.topics.Deliveries, 0}].oldest()
	if en.state != entryDone || len(pausesIn(s, en.outs)) != 1 {
		t.Fatalf("entry %v with %d pauses among its outputs; want done with the automatic pause", en.state, len(pausesIn(s, en.outs)))
	}

	e.dropped(map[string][]int32{s.topics.Deliveries: {0}})
	e.sweep(s.now())
	s.pauses.mu.Lock()
	tracked := len(s.pauses.m)
	s.pauses.mu.Unlock()
	if tracked != 0 {
		t.Fatalf("%d automatic pauses still tracked after their entry was dropped", tracked)
	}
	d := &hooklinev1.Delivery{DeliveryId: "dlv_1", EndpointId: "ep_1", TenantId: "t", Attempt: 1}
	outs := s.handler.attempter.outcome(t.Context(), d, s.store.Get("ep_1"), attempt.Result{Class: hooklinev1.OutcomeClass_OUTCOME_CLASS_PERMANENT, StatusCode: 400, Started: time.Now()})
	if len(pausesIn(s, outs)) != 1 {
		t.Fatal("after its pause was dropped uncommitted, the next permanent failure does not pause the endpoint")
	}
}

// pausesIn returns the endpoints records (automatic pauses) among outs.
func pausesIn(s *Service, outs []*kgo.Record) []*kgo.Record {
	var p []*kgo.Record
	for _, o := range outs {
		if o.Topic == s.topics.Endpoints {
			p = append(p, o)
		}
	}
	return p
}

// TestAnEndpointResumedAfterAnAutomaticPauseIsPausedAgainByItsNextStreak:
// Hookline paused an endpoint after its streak of permanent failures; an
// operator resumed it with the receiver still refusing. Its next streak
// pauses it again (R-RECV-4) — `make sim` with --auto-pause-after 3 and
// an endpoint that refuses every event: after the first resume it got
// 161 permanent failures in a row, never paused again, because the
// pause that had won kept the endpoint disarmed until a success.
func TestAnEndpointResumedAfterAnAutomaticPauseIsPausedAgainByItsNextStreak(t *testing.T) {
	s := newTestService(t)
	s.cfg.AutoPauseAfter = 2
	ep := endpoint("http://127.0.0.1:1")
	s.store.Put(ep)
	fail := func(i int) []*kgo.Record {
		d := &hooklinev1.Delivery{DeliveryId: fmt.Sprint("dlv_", i), EndpointId: "ep_1", TenantId: "t", Attempt: 1}
		return pausesIn(s, s.handler.attempter.outcome(t.Context(), d, s.store.Get("ep_1"), attempt.Result{Class: hooklinev1.OutcomeClass_OUTCOME_CLASS_PERMANENT, StatusCode: 400, Started: time.Now()}))
	}
	if fail(0) != nil || len(fail(1)) != 1 {
		t.Fatal("the second permanent failure in a row does not pause the endpoint")
	}
	// An attempt in flight when the pause was written fails after it:
	// the same version, the same streak — no second pause.
	if len(fail(2)) != 0 {
		t.Fatal("a failure of the version the pause was written from paused it twice")
	}
	// The pause committed (version 2) and an operator resumed the
	// endpoint (version 3), its receiver still refusing.
	resumed := proto.Clone(ep).(*hooklinev1.EndpointRecord)
	resumed.Version = 3
	s.store.Put(resumed)
	if len(fail(3)) != 0 {
		t.Fatal("the first failure after the resume paused the endpoint: a new streak starts from zero")
	}
	if len(fail(4)) != 1 {
		t.Fatal("a resumed endpoint whose receiver still refuses is not paused again by its next streak")
	}
}

// TestNoAttemptStartsForAnEndpointWhoseAutomaticPauseIsPending: once an
// endpoint's streak reached the threshold, its pause is written with the
// next commit and takes effect when the endpoints view reads it; until
// then its lane starts nothing more (it would only fail and dead-letter
// what the pause is there to hold). `make sim` seed 6: a dispatcher that
// took over a refusing endpoint's backlog decided the pause at its third
// failure and POSTed 102 more in the next 0.1 s, each failed for good.
// Once the pause is dropped uncommitted, the lane goes on.
func TestNoAttemptStartsForAnEndpointWhoseAutomaticPauseIsPending(t *testing.T) {
	url, posts := countingReceiver(t, http.StatusBadRequest)
	s := newTestService(t)
	s.cfg.AutoPauseAfter = 2
	ep := endpoint(url, sign.GenerateSecret())
	ep.Endpoint.MaxInFlight = 1
	s.store.Put(ep)
	e := testEngine(t, s)
	for i := range 6 {
		e.pollID(t, 0, int64(i), fmt.Sprint("dlv_", i))
	}
	for range 6 {
		e.pump(s.now())
		e.waitOutstanding(t, 0)
	}
	if n := posts.Load(); n != 2 {
		t.Fatalf("%d POSTs with the pause pending after the second permanent failure, want 2", n)
	}
	e.dropped(map[string][]int32{s.topics.Deliveries: {0}}) // the pause never commits: re-armed
	e.sweep(s.now())
	for i := range 2 {
		e.pollID(t, 1, int64(i), fmt.Sprint("dlv_p1_", i))
	}
	later := s.now().Add(pausePendingRecheck) // when the held lane looks again
	e.f.wake(later)
	e.pump(later)
	e.waitOutstanding(t, 0)
	if n := posts.Load(); n != 3 {
		t.Fatalf("%d POSTs after the pending pause was dropped, want the lane to go on (3)", n)
	}
}
