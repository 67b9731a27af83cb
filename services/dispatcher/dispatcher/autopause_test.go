package dispatcher

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/sdk/sign"
	"github.com/hookline/hookline/services/dispatcher/attempt"
	"github.com/twmb/franz-go/pkg/kgo"
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
	outs := s.outcome(t.Context(), d, s.store.Get("ep_1"), attempt.Result{Class: hooklinev1.OutcomeClass_OUTCOME_CLASS_PERMANENT, StatusCode: 400, Started: time.Now()})
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
