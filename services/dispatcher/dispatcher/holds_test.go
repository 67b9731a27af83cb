package dispatcher

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/endpoints"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/kafkatest"
	"github.com/hookline/hookline/sdk/sign"
	"github.com/hookline/hookline/services/dispatcher/attempt"
	"github.com/hookline/hookline/services/dispatcher/health"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct{ now atomic.Int64 }

func newFakeClock(t time.Time) *fakeClock {
	c := &fakeClock{}
	c.now.Store(t.UnixNano())
	return c
}
func (c *fakeClock) Now() time.Time      { return time.Unix(0, c.now.Load()) }
func (c *fakeClock) Set(t time.Time)     { c.now.Store(t.UnixNano()) }
func (c *fakeClock) Add(d time.Duration) { c.now.Add(int64(d)) }
func (c *fakeClock) option() Option      { return WithClock(c.Now) }

func newResult() *hooklinev1.AttemptResult { return &hooklinev1.AttemptResult{} }
func newDelivery() *hooklinev1.Delivery    { return &hooklinev1.Delivery{} }
func newDeadLetter() *hooklinev1.DeadLetter {
	return &hooklinev1.DeadLetter{}
}

// TestEveryHoldEndsExpiredAtTheMaximumHold plays the scheduler for a
// delivery of a paused endpoint that is never resumed: it is parked once,
// due at the end of its hold, and the scheduler releases it then (its
// deadline kept, the time parked added to paused_for). The hold ends
// EXPIRED, with a result and a dead letter, at MaxHold — after one
// parked record, not one per recheck.
func TestEveryHoldEndsExpiredAtTheMaximumHold(t *testing.T) {
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	clock := newFakeClock(start)
	s := newTestService(t, clock.option())
	s.cfg.MaxHold = 2 * time.Hour
	ep := endpoint("http://127.0.0.1:1", sign.GenerateSecret())
	ep.Endpoint.Status = hooklinev1.EndpointStatus_ENDPOINT_STATUS_PAUSED
	s.store.Put(ep)
	r := deliveryRecord(t, s)
	out := s.handler.handleSafely(t.Context(), r)
	if retry := kafkatest.DecodeTopic(t, out, s.topics.Retries, newDelivery); len(retry) != 0 {
		t.Fatalf("a park wrote %d retries records, want none: it holds in the parked topic", len(retry))
	}
	parked := kafkatest.DecodeTopic(t, out, s.topics.Parked, newDelivery)
	if len(parked) != 1 {
		t.Fatalf("outputs %v, want one parked record", out)
	}
	p := parked[0]
	if got := p.GetDueAt().AsTime(); !got.Equal(start.Add(s.cfg.MaxHold)) {
		t.Fatalf("parked due at %v, want the end of the hold %v", got, start.Add(s.cfg.MaxHold))
	}
	if !p.GetParkedAt().AsTime().Equal(start) || len(p.GetPayload()) != 0 || p.GetPayloadRecord() == nil {
		t.Fatalf("parked record %v: want parked_at now and the payload by reference", p)
	}
	// The scheduler's release at the end of the hold.
	clock.Set(p.GetDueAt().AsTime())
	p.PausedFor = durationpb.New(clock.Now().Sub(p.GetParkedAt().AsTime()))
	p.ParkedAt = nil
	r, _ = hkafka.Record(s.topics.Deliveries, "ep_1", p)
	out = s.handler.handleSafely(t.Context(), r)
	dead := kafkatest.DecodeTopic(t, out, s.topics.Dead, newDeadLetter)
	res := kafkatest.DecodeTopic(t, out, s.topics.Results, newResult)
	if len(dead) != 1 || len(res) != 1 || res[0].GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_EXPIRED || !strings.Contains(res[0].GetReason(), "maximum hold") {
		t.Fatalf("hold ended with results %v and %d dead letters, want one EXPIRED naming the maximum hold", res, len(dead))
	}
	if dead[0].GetDelivery().GetAttempt() != 3 {
		t.Fatalf("dead letter's attempt %d, want 3: a hold burns no attempt", dead[0].GetDelivery().GetAttempt())
	}
}

// TestAnOutageHoldEndsAtTheGiveUpTime: a retry held in outage mode is
// not held past its give-up time: its hold is cut to it, and then it
// ends EXPIRED instead of being held again.
func TestAnOutageHoldEndsAtTheGiveUpTime(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	clock := newFakeClock(now)
	s := newTestService(t, clock.option())
	d := &hooklinev1.Delivery{DeliveryId: "dlv_1", EventId: "evt_1", TenantId: "t", EndpointId: "ep_1", Attempt: 4,
		GiveUpAt: timestamppb.New(now.Add(30 * time.Second)), Kind: hooklinev1.DeliveryKind_DELIVERY_KIND_RETRY}
	r, _ := hkafka.Record(s.topics.Deliveries, "ep_1", d)
	out := s.holds.hold(t.Context(), r, d, now.Add(s.cfg.OutageRecheck))
	held := kafkatest.DecodeTopic(t, out, s.topics.Retries, newDelivery)
	if len(held) != 1 || !held[0].GetDueAt().AsTime().Equal(now.Add(30*time.Second)) || !held[0].GetHeldSince().AsTime().Equal(now) {
		t.Fatalf("held %v, want due at the give-up time, held since now", held)
	}
	clock.Add(30 * time.Second)
	out = s.holds.hold(t.Context(), r, held[0], clock.Now().Add(s.cfg.OutageRecheck))
	res := kafkatest.DecodeTopic(t, out, s.topics.Results, newResult)
	if len(res) != 1 || res[0].GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_EXPIRED || len(kafkatest.DecodeTopic(t, out, s.topics.Dead, newDeadLetter)) != 1 {
		t.Fatalf("at the give-up time: %v, want EXPIRED and a dead letter", res)
	}
	// A spilled delivery past its give-up time ends the same way.
	out = s.holds.spill(t.Context(), r, held[0], clock.Now().Add(time.Second), "backlog")
	if res := kafkatest.DecodeTopic(t, out, s.topics.Results, newResult); len(res) != 1 || res[0].GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_EXPIRED {
		t.Fatalf("spill past the give-up time: %v, want EXPIRED", res)
	}
}

// TestAProbeThatPanicsIsOver: a probe whose attempt panics (a worker
// fault) ends the probe, so the endpoint gets another.
func TestAProbeThatPanicsIsOver(t *testing.T) {
	s := newTestService(t)
	s.store.Put(endpoint("http://127.0.0.1:1")) // no secret: signing panics
	now := time.Now()
	s.rcv.Observe("ep_1", "a", false, false, now, health.Thresholds{FailingAfter: 5, OutageAfter: 2})
	s.rcv.Observe("ep_1", "b", false, false, now, health.Thresholds{FailingAfter: 5, OutageAfter: 2})
	if g, _ := s.rcv.OutageGate("ep_1", now, true, time.Minute); g != health.Probe {
		t.Fatalf("gate %v, want the probe", g)
	}
	r := deliveryRecord(t, s)
	d, _ := decodeDelivery(r)
	s.handler.attemptRecord(t.Context(), r, d, s.store.Get("ep_1"), true)
	if g, _ := s.rcv.OutageGate("ep_1", time.Now(), true, time.Minute); g != health.Probe {
		t.Fatalf("after a probe that panicked: gate %v, want another probe", g)
	}
}

// TestStateOfDeletedEndpointsIsPruned: health, the notices view and the
// in-flight metric series forget deleted endpoints.
func TestStateOfDeletedEndpointsIsPruned(t *testing.T) {
	s := newTestService(t)
	s.metrics.on = true
	now := time.Now()
	for _, id := range []string{"ep_1", "gone"} {
		s.rcv.Observe(id, "a", false, false, now, health.Thresholds{FailingAfter: 1, OutageAfter: 2})
		s.metrics.flight(t.Context(), id, 1)
		s.metrics.flight(t.Context(), id, -1)
		n, _ := hkafka.Record(s.topics.Notices, id, &hooklinev1.Notice{Type: hooklinev1.NoticeType_NOTICE_TYPE_ENDPOINT_FAILING, EndpointId: id, At: timestamppb.Now()})
		s.notices.Apply(n)
	}
	s.store.Put(endpoint("http://127.0.0.1:1")) // ep_1 exists; "gone" does not
	s.pruneState()
	if s.rcv.Len() != 1 || s.notices.Len() != 1 || s.metrics.inFlight.len() != 1 {
		t.Fatalf("after pruning: %d receivers, %d notice entries, %d in-flight series; want 1 each", s.rcv.Len(), s.notices.Len(), s.metrics.inFlight.len())
	}
	s.pruneState() // ep_1's series was not used since: it goes too
	if s.metrics.inFlight.len() != 0 {
		t.Fatalf("idle in-flight series kept: %d", s.metrics.inFlight.len())
	}
}

// TestAutoPauseWaitsForItsCommit: the automatic pause is not applied to
// the local view before its transaction commits (deliveries keep going
// to their lane), and one that did not land — its transaction aborted,
// or it lost to a concurrent change — re-arms the endpoint: the next
// permanent failure pauses it again.
func TestAutoPauseWaitsForItsCommit(t *testing.T) {
	s := newTestService(t)
	s.cfg.AutoPauseAfter = 3
	ep := endpoint("http://127.0.0.1:1", sign.GenerateSecret())
	s.store.Put(ep)
	fail := func(i int) []*kgo.Record {
		d := &hooklinev1.Delivery{DeliveryId: "dlv_" + string(rune('a'+i)), EndpointId: "ep_1", TenantId: "t", Attempt: 1}
		return s.handler.attempter.outcome(t.Context(), d, s.store.Get("ep_1"), attempt.Result{Class: hooklinev1.OutcomeClass_OUTCOME_CLASS_PERMANENT, StatusCode: 400, Started: time.Now()})
	}
	pauses := func(outs []*kgo.Record) []*kgo.Record {
		var p []*kgo.Record
		for _, o := range outs {
			if o.Topic == s.topics.Endpoints {
				p = append(p, o)
			}
		}
		return p
	}
	var outs []*kgo.Record
	for i := range 3 {
		outs = fail(i)
	}
	if len(pauses(outs)) != 1 {
		t.Fatal("no automatic pause at the threshold")
	}
	if v, _ := s.handler.triage(&hooklinev1.Delivery{EndpointId: "ep_1", TenantId: "t"}, time.Now(), true); v != toLane {
		t.Fatalf("before its commit the pause is applied locally: triage %v, want toLane", v)
	}
	if len(pauses(fail(3))) != 0 {
		t.Fatal("paused twice while the first pause is pending")
	}
	// The transaction aborts: the endpoint is re-armed.
	s.pauses.committed(t.Context(), outs, false)
	outs = fail(4)
	if len(pauses(outs)) != 1 {
		t.Fatal("after an aborted pause, the next permanent failure does not pause")
	}
	// It commits but loses to a concurrent change.
	s.pauses.outcome = func(context.Context, *endpoints.Tracked, *kgo.Record) (endpoints.Outcome, error) {
		return endpoints.Lost, nil
	}
	s.pauses.committed(t.Context(), outs, true)
	s.pauses.wg.Wait()
	if len(pauses(fail(5))) != 1 {
		t.Fatal("after a pause that lost, the next permanent failure does not pause")
	}
}

// TestRepeatedWorkerFaultsSetTheDeliveryAside: a delivery set aside after
// MaxFaults worker faults gets a FAILED result and a DeadLetter (so it
// has a terminal outcome and can be resent), not only a raw copy.
func TestRepeatedWorkerFaultsSetTheDeliveryAside(t *testing.T) {
	s := newTestService(t)
	s.store.Put(endpoint("http://127.0.0.1:1")) // no secret: signing panics
	r := deliveryRecord(t, s)
	var out []*kgo.Record
	for range s.cfg.MaxFaults {
		out = s.handler.handleSafely(t.Context(), r)
		if out[0].Topic == s.topics.Deliveries {
			r = out[0]
		}
	}
	res := kafkatest.DecodeTopic(t, out, s.topics.Results, newResult)
	dead := kafkatest.DecodeTopic(t, out, s.topics.Dead, newDeadLetter)
	if len(res) != 1 || res[0].GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_FAILED || !strings.Contains(res[0].GetReason(), "worker faults") ||
		len(dead) != 1 || dead[0].GetDelivery().GetAttempt() != 3 || string(dead[0].GetDelivery().GetPayload()) != `{}` {
		t.Fatalf("set aside as results %v, dead letters %v; want one FAILED result and a DeadLetter with the delivery as it was", res, dead)
	}
}

// TestARecordThatCanNeverBeWrittenIsDeadLetteredWithoutItsPayload: a
// delivery whose retry would be over the record limit ends FAILED with a
// small dead letter instead of aborting every commit; and one whose
// record a broker refused is set aside when it comes again, with no
// second attempt.
func TestARecordThatCanNeverBeWrittenIsDeadLetteredWithoutItsPayload(t *testing.T) {
	url, requests := countingReceiver(t, http.StatusServiceUnavailable)
	s := newTestService(t)
	s.cfg.OutageAfter = 0
	s.store.Put(endpoint(url, sign.GenerateSecret()))
	d := &hooklinev1.Delivery{DeliveryId: "dlv_big", EventId: "evt_1", TenantId: "t", EndpointId: "ep_1", Attempt: 1,
		Payload: []byte(`"` + strings.Repeat("x", recordLimit) + `"`)}
	r, _ := hkafka.Record(s.topics.Deliveries, "ep_1", d)
	out := s.handler.handleSafely(t.Context(), r)
	for _, o := range out {
		if n := recordBytes(o); n > recordLimit {
			t.Fatalf("a record of %d bytes for %s handed on", n, o.Topic)
		}
	}
	res := kafkatest.DecodeTopic(t, out, s.topics.Results, newResult)
	dead := kafkatest.DecodeTopic(t, out, s.topics.Dead, newDeadLetter)
	if len(res) != 1 || res[0].GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_FAILED || res[0].GetStatusCode() != 503 ||
		!strings.Contains(res[0].GetReason(), "cannot be written") || len(dead) != 1 || len(dead[0].GetDelivery().GetPayload()) != 0 {
		t.Fatalf("results %v, dead letters %d; want the attempt's result FAILED and a dead letter without the payload", res, len(dead))
	}

	// A broker refuses a small delivery's retry (its topic's
	// max.message.bytes is lower): the delivery is marked, and when it
	// comes again after the abort it is set aside without an attempt.
	small := deliveryRecord(t, s)
	retry, _ := hkafka.Record(s.topics.Retries, "ep_1", &hooklinev1.Delivery{DeliveryId: "dlv_1", Payload: make([]byte, bigRecord)})
	other, _ := hkafka.Record(s.topics.Retries, "ep_1", &hooklinev1.Delivery{DeliveryId: "dlv_2"})
	if reason := s.writer.classifyAbort([]refused{{R: retry, Err: kerrMessageTooLarge}, {R: other, Err: kerrMessageTooLarge}}, time.Now()); reason != "unwritable" {
		t.Fatalf("abort reason %q, want unwritable", reason)
	}
	before := requests.Load()
	out = s.handler.handleSafely(t.Context(), small)
	if requests.Load() != before {
		t.Fatal("a delivery marked unwritable was attempted again")
	}
	if res := kafkatest.DecodeTopic(t, out, s.topics.Results, newResult); len(res) != 1 || res[0].GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_FAILED {
		t.Fatalf("marked delivery: %v, want FAILED", res)
	}
	if s.writer.unwritable.Reason("dlv_2") != "" {
		t.Fatal("a small record refused in the same batch was marked too")
	}
	// A refusal no delivery can fix is not blamed on one.
	if reason := s.writer.classifyAbort([]refused{{R: other, Err: kerrTopicAuthorizationFailed}}, time.Now()); reason != "refused" {
		t.Fatalf("abort reason %q, want refused", reason)
	}
}

// TestAbortedCommitsBackOff: the pause after aborted commits in a row
// doubles from abortBackoffMin, up to transientBackoffMax while Kafka
// itself aborts them (a broker restarting) and up to abortBackoffMax when
// it refuses the writes; a commit resets it.
func TestAbortedCommitsBackOff(t *testing.T) {
	s := newTestService(t)
	p0 := []hkafka.TopicPartition{{Topic: s.topics.Deliveries, Partition: 0}}
	var got []time.Duration
	for range 12 {
		w, _ := s.afterTransaction(false, true, nil, 1, nil, p0)
		got = append(got, w)
	}
	if got[0] != abortBackoffMin || got[1] != 2*abortBackoffMin || got[len(got)-1] != transientBackoffMax {
		t.Fatalf("backoffs %v, want doubling from %v to %v", got, abortBackoffMin, transientBackoffMax)
	}
	if w := hkafka.AbortBackoff(12, "refused"); w != abortBackoffMax {
		t.Fatalf("backoff after 12 refusals %v, want %v", w, abortBackoffMax)
	}
	s.afterTransaction(true, false, nil, 1, nil, p0)
	if w, _ := s.afterTransaction(false, true, nil, 1, nil, p0); w != abortBackoffMin {
		t.Fatalf("after a commit the backoff is %v, want %v again", w, abortBackoffMin)
	}
	// Per partition: another partition's commit does not reset it.
	p1 := []hkafka.TopicPartition{{Topic: s.topics.Deliveries, Partition: 1}}
	s.afterTransaction(true, false, nil, 1, nil, p1)
	if w, _ := s.afterTransaction(false, true, nil, 1, nil, p0); w != 2*abortBackoffMin {
		t.Fatalf("after another partition's commit the backoff is %v, want %v", w, 2*abortBackoffMin)
	}
}

var (
	kerrMessageTooLarge          = kerr.MessageTooLarge
	kerrTopicAuthorizationFailed = kerr.TopicAuthorizationFailed
)
