package dispatcher

import (
	"fmt"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/services/dispatcher/attempt"
	"github.com/hookline/hookline/services/dispatcher/health"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestOutageModeCrossesAHandoverOnlyForTransientFailures: the dispatcher
// that takes an endpoint over seeds its health from the failing notice
// the previous owner wrote. An endpoint down (5xx) stays in outage mode
// across the handover; one that refuses every event (400) was never in
// outage mode and must not be put there — `make sim` seed 6, with
// --auto-pause-after 3 and an endpoint answering 400 to everything: after
// its partition moved, its deliveries were held and rechecked every
// 500 ms behind a probe that failed permanently each time, backing off
// (14,405 deferrals, 67.5 Kafka records per delivery).
func TestOutageModeCrossesAHandoverOnlyForTransientFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		class  hooklinev1.OutcomeClass
		status int
		held   bool
	}{
		{"refusing every event (400)", hooklinev1.OutcomeClass_OUTCOME_CLASS_PERMANENT, 400, false},
		{"down (503)", hooklinev1.OutcomeClass_OUTCOME_CLASS_TRANSIENT, 503, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prev, next := newTestService(t), newTestService(t)
			prev.cfg.AutoPauseAfter = 0
			for _, s := range []*Service{prev, next} {
				s.store.Put(endpoint("http://127.0.0.1:1"))
			}
			var notices []*kgo.Record
			for i := range max(prev.cfg.FailingAfter, prev.cfg.OutageAfter) {
				d := &hooklinev1.Delivery{DeliveryId: fmt.Sprint("dlv_", i), EndpointId: "ep_1", TenantId: "t", Attempt: 1}
				outs := prev.handler.attempter.outcome(t.Context(), d, prev.store.Get("ep_1"), attempt.Result{Class: tc.class, StatusCode: tc.status, Started: time.Now()})
				for _, o := range outs {
					if o.Topic == prev.topics.Notices {
						notices = append(notices, o)
					}
				}
			}
			if len(notices) != 1 {
				t.Fatalf("%d notices after %d failures, want the one endpoint.failing", len(notices), prev.cfg.FailingAfter)
			}
			next.notices.Apply(notices[0])
			g, _ := next.rcv.OutageGate("ep_1", time.Now(), true, time.Minute)
			if held := g != health.Pass; held != tc.held {
				t.Fatalf("the next owner's outage gate: %v; want in outage mode = %v", g, tc.held)
			}
			// Either way the outage's notice is not sent twice.
			d := &hooklinev1.Delivery{DeliveryId: "dlv_next", EndpointId: "ep_1", TenantId: "t", Attempt: 1}
			for _, o := range next.handler.attempter.outcome(t.Context(), d, next.store.Get("ep_1"), attempt.Result{Class: tc.class, StatusCode: tc.status, Started: time.Now()}) {
				if o.Topic == next.topics.Notices {
					t.Fatal("the next owner sent a second endpoint.failing notice for the same outage")
				}
			}
		})
	}
}
