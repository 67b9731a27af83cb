package dispatcher

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/kafkatest"
	"github.com/hookline/hookline/sdk/sign"
	"github.com/hookline/hookline/services/dispatcher/health"
)

// TestAProbeSetAsideAsUnwritableIsOver: the delivery outage mode lets
// through as the endpoint's probe is set aside before its attempt (a
// broker refused one of its records): the probe is over, so the next
// delivery probes instead of every delivery of the endpoint being held
// until --max-hold.
func TestAProbeSetAsideAsUnwritableIsOver(t *testing.T) {
	var requests atomic.Int32
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { requests.Add(1) }))
	defer rx.Close()
	s := newTestService(t)
	s.store.Put(endpoint(rx.URL, sign.GenerateSecret()))
	now := s.now()
	s.rcv.Observe("ep_1", "a", false, false, now, health.Thresholds{FailingAfter: 5, OutageAfter: 2})
	s.rcv.Observe("ep_1", "b", false, false, now, health.Thresholds{FailingAfter: 5, OutageAfter: 2}) // outage mode
	s.writer.unwritable.Mark("dlv_0", "refused by the broker", now)

	e := testEngine(t, s)
	e.pollID(t, 0, 0, "dlv_0")
	e.pump(now)
	e.waitOutstanding(t, 0)
	en := e.w.parts[tp{s.topics.Deliveries, 0}].oldest()
	if en.state != entryDone {
		t.Fatalf("probe entry in state %v, want done", en.state)
	}
	if res := kafkatest.DecodeTopic(t, en.outs, s.topics.Results, newResult); len(res) != 1 || res[0].GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_FAILED {
		t.Fatalf("probe set aside: results %v, want one FAILED", res)
	}
	if requests.Load() != 0 {
		t.Fatal("a delivery marked unwritable was attempted")
	}
	if g, _ := s.rcv.OutageGate("ep_1", s.now().Add(time.Millisecond), true, time.Minute); g != health.Probe {
		t.Fatalf("after the probe was set aside: gate %v, want the next delivery to probe", g)
	}
}
