package e2e

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/kafkatest"
	"github.com/hookline/hookline/services/dispatcher/dispatcher"
	"github.com/twmb/franz-go/pkg/kadm"
)

// TestHeldDeliveriesStartWithinSecondsOfAResume: after a pause of half an
// hour, every held delivery starts within 10 s of ResumeEndpoint (the
// bound the operator guide gives: --park-recheck, 5 s, plus the
// scheduler), at attempt 1. Before, held deliveries looked again only
// every minute.
func TestHeldDeliveriesStartWithinSecondsOfAResume(t *testing.T) {
	inVirtualTime(t, func(t *testing.T) {
		vs := startVirtual(t, func(c *dispatcher.Config) { c.ParkRecheck = defaults[dispatcher.Config](t).ParkRecheck })
		defer vs.stop()
		vs.wait = time.Hour
		rx := vs.receiver(t, "8080", func(int) int { return http.StatusOK })
		defer rx.srv.Close()
		ep := vs.createEndpoint(rx.url)
		if _, err := vs.endpoints().PauseEndpoint(vs.ctx(), &hooklinev1.PauseEndpointRequest{Id: ep.GetEndpoint().GetId(), Reason: "maintenance"}); err != nil {
			t.Fatal(err)
		}
		const n = 5
		for range n {
			vs.publish("invoice.paid", `{}`)
		}
		time.Sleep(30 * time.Minute)
		if got := len(rx.times()); got != 0 {
			t.Fatalf("a paused endpoint received %d requests", got)
		}
		resumed := time.Now()
		if _, err := vs.endpoints().ResumeEndpoint(vs.ctx(), &hooklinev1.ResumeEndpointRequest{Id: ep.GetEndpoint().GetId()}); err != nil {
			t.Fatal(err)
		}
		results := kafkatest.Decode(t, vs.readN(vs.topics.Results, 2*n), func() *hooklinev1.AttemptResult { return &hooklinev1.AttemptResult{} })
		for _, r := range results {
			if r.GetState() == hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED && r.GetAttempt() != 1 {
				t.Fatalf("delivered at attempt %d, want 1", r.GetAttempt())
			}
		}
		at := rx.times()
		if len(at) != n {
			t.Fatalf("receiver got %d requests, want %d", len(at), n)
		}
		for i, a := range at {
			if late := a.Sub(resumed); late > 10*time.Second {
				t.Errorf("held delivery %d started %v after the resume, want within 10 s", i+1, late)
			}
		}
	})
}

// TestARecordTheBrokerRefusesIsDeadLetteredNotRetriedForEver: the
// retries topic takes records of at most 32 KiB, and a delivery of a
// 40 KiB payload fails with a 503: its retry can never be written. The
// commit aborts once; the delivery then ends FAILED with a dead letter
// (without its payload), and the receiver sees one attempt, not a storm
// of re-attempts.
func TestARecordTheBrokerRefusesIsDeadLetteredNotRetriedForEver(t *testing.T) {
	var requests atomic.Int32
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer rx.Close()
	st := startStack(t, func(c *stackConfig) { c.dispatcher.OutageAfter = 0 })
	// Lowered after the services started: at start they raise a topic's
	// max.message.bytes to their own (EnsureTopics), so a broker that
	// refuses a record is one whose limit an operator changed since. The
	// scheduler ensures its topics before it joins its group, and
	// startStack waits only for ingest: wait for the scheduler's member,
	// or its raise can land after the change below.
	waitGroupMember(t, st, st.kafka.TopicPrefix+"scheduler")
	small := "32768"
	alter, err := kafkaAdmin(t, st.kafka.Brokers).AlterTopicConfigs(t.Context(), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: &small}}, st.topics.Retries)
	if err == nil {
		for _, r := range alter {
			err = errors.Join(err, r.Err)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	st.createEndpoint(rx.URL)
	st.publish("invoice.paid", `"`+strings.Repeat("x", 40<<10)+`"`)
	res := kafkatest.Decode(t, st.readN(st.topics.Results, 1), func() *hooklinev1.AttemptResult { return &hooklinev1.AttemptResult{} })[0]
	if res.GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_FAILED || !strings.Contains(res.GetReason(), "cannot be written") {
		t.Fatalf("result %v, want FAILED: cannot be written", res)
	}
	dead := kafkatest.Decode(t, st.readN(st.topics.Dead, 1), func() *hooklinev1.DeadLetter { return &hooklinev1.DeadLetter{} })[0]
	if dead.GetDelivery().GetDeliveryId() != res.GetDeliveryId() || len(dead.GetDelivery().GetPayload()) != 0 {
		t.Fatalf("dead letter %v, want the delivery without its payload", dead.GetDelivery())
	}
	if n := requests.Load(); n > 2 {
		t.Fatalf("receiver got %d requests for one delivery whose retry cannot be written", n)
	}
}

// waitGroupMember waits until group has a member in a stable group.
func waitGroupMember(t *testing.T, st *stack, group string) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		described, err := st.admin.DescribeGroups(t.Context(), group)
		if err == nil {
			if g, ok := described[group]; ok && g.Err == nil && g.State == "Stable" && len(g.Members) > 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s has no stable member after %v (last error %v)", group, waitFor, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
