package dispatcher

import (
	"context"
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
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/kafkatest"
	"github.com/hookline/hookline/platform/lanes"
	"github.com/hookline/hookline/platform/payloadref"
	"github.com/hookline/hookline/sdk/sign"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// scriptedReceiver answers each body with the status code set for it
// (200 when none) and records the bodies in the order they came.
type scriptedReceiver struct {
	mu    sync.Mutex
	codes map[string]int
	got   []string
	holds map[string]chan struct{} // bodies answered only once released (hold)
}

func (rx *scriptedReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	rx.mu.Lock()
	rx.got = append(rx.got, string(raw))
	code, ok := rx.codes[string(raw)]
	held := rx.holds[string(raw)]
	rx.mu.Unlock()
	if held != nil {
		select {
		case <-held:
		case <-r.Context().Done():
		}
	}
	if !ok {
		code = http.StatusOK
	}
	w.WriteHeader(code)
}

func (rx *scriptedReceiver) set(body string, code int) {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	rx.codes[body] = code
}

// hold keeps the answers to body until the function it returns is called.
func (rx *scriptedReceiver) hold(body string) (release func()) {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	if rx.holds == nil {
		rx.holds = map[string]chan struct{}{}
	}
	ch := make(chan struct{})
	rx.holds[body] = ch
	return sync.OnceFunc(func() { close(ch) })
}

func (rx *scriptedReceiver) received() []string {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	return slices.Clone(rx.got)
}

// blockFixture is an endpoint ordered per key with on_head_failure
// block, and an engine for it.
type blockFixture struct {
	rx *scriptedReceiver
	ep *hooklinev1.EndpointRecord
	s  *Service
	e  *engine
	// log holds the deliveries published, by offset: what a blocked
	// head's reference is read back from.
	log   map[int64]*kgo.Record
	reads int
}

func newBlockFixture(t *testing.T) *blockFixture {
	t.Helper()
	rx := &scriptedReceiver{codes: map[string]int{`"a0"`: http.StatusBadRequest}}
	srv := httptest.NewServer(rx)
	t.Cleanup(srv.Close)
	ep := endpoint(srv.URL, sign.GenerateSecret())
	ep.Endpoint.Ordering = hooklinev1.Ordering_ORDERING_PER_KEY
	ep.Endpoint.OnHeadFailure = hooklinev1.HeadFailure_HEAD_FAILURE_BLOCK
	ep.Endpoint.OutageModeDisabled = true
	ep.Endpoint.MaxInFlight = 2
	retriesIn(ep, time.Second) // a retried head's followers wait for it in memory
	f := &blockFixture{rx: rx, ep: ep}
	f.restart(t, nil)
	return f
}

// restart gives the fixture a new dispatcher, as a new owner of the
// partition: its lanes view holds the lanes records given.
func (f *blockFixture) restart(t *testing.T, laneRecords []*kgo.Record) {
	t.Helper()
	f.s = newTestService(t)
	f.s.cfg.AutoPauseAfter = 0
	f.s.store.Put(f.ep)
	for _, r := range laneRecords {
		f.s.lanes.Apply(r)
	}
	f.e = testEngine(t, f.s)
	f.e.rs.readRecord = func(_ context.Context, ref *hooklinev1.RecordRef) (*kgo.Record, error) {
		f.reads++
		if r := f.log[ref.GetOffset()]; r != nil && ref.GetTopic() == r.Topic {
			return r, nil
		}
		return nil, payloadref.ErrGone
	}
}

// publish places deliveries of key k with bodies `"<k><i>"` at offsets.
func (f *blockFixture) publish(t *testing.T, key string, i int, offset int64) {
	t.Helper()
	d := &hooklinev1.Delivery{DeliveryId: fmt.Sprint("dlv_", key, i), EventId: fmt.Sprint("evt_", key, i), TenantId: "t", EndpointId: "ep_1",
		EventType: "a.b", Payload: fmt.Appendf(nil, `"%s%d"`, key, i), Attempt: 1, OrderingKey: key}
	if f.log == nil {
		f.log = map[int64]*kgo.Record{}
	}
	r, err := hkafka.Record(f.s.topics.Deliveries, d.GetEndpointId(), d)
	if err != nil {
		t.Fatal(err)
	}
	r.Offset = offset
	f.log[offset] = r
	f.e.placeAt(t, d, offset)
}

// command places an operator's command on key's head id at offset.
func (f *blockFixture) command(t *testing.T, op hooklinev1.LaneOp, key, id string, offset int64) {
	t.Helper()
	f.e.placeAt(t, &hooklinev1.Delivery{DeliveryId: id, TenantId: "t", EndpointId: "ep_1", OrderingKey: key,
		Kind: hooklinev1.DeliveryKind_DELIVERY_KIND_LANE_COMMAND, DueAt: timestamppb.New(f.s.now()),
		LaneCommand: &hooklinev1.LaneCommand{Op: op, CommandId: "lcm_1"}}, offset)
}

// commit takes the outputs a commit would write now, lanes records
// included, as committed.
func (e *engine) commitNow() []*kgo.Record {
	var outs []*kgo.Record
	for _, pw := range e.w.parts {
		outs, _, _ = e.w.popDone(pw, e.s.now(), outs)
	}
	outs = e.c.lanes.outputs(outs)
	e.c.lanes.ended(true)
	return outs
}

// blockedLane publishes a0 (which fails permanently), a1, a2, b0 and b1,
// runs the engine dry and commits: lane a is blocked behind a0.
func (f *blockFixture) blockedLane(t *testing.T) []*kgo.Record {
	t.Helper()
	f.publish(t, "a", 0, 0)
	f.publish(t, "a", 1, 1)
	f.publish(t, "b", 0, 2)
	f.publish(t, "a", 2, 3)
	f.publish(t, "b", 1, 4)
	f.e.runDry(t)
	return f.e.commitNow()
}

// TestABlockedLaneHoldsItsFollowersWhileOtherKeysGoOn: a block endpoint's
// head that fails permanently is not dead-lettered: its result says
// BLOCKED, a lane.blocked notice names it, the lanes topic keeps it by
// reference (no payload), its followers wait, and another key's lane
// goes on.
func TestABlockedLaneHoldsItsFollowersWhileOtherKeysGoOn(t *testing.T) {
	f := newBlockFixture(t)
	outs := f.blockedLane(t)
	if got := f.rx.received(); len(got) != 3 || got[0] != `"a0"` && got[1] != `"a0"` || slices.Contains(got, `"a1"`) {
		t.Fatalf("receiver got %v; want a0 (failing) and b0, b1, never a1 or a2", got)
	}
	if dead := kafkatest.DecodeTopic(t, outs, f.s.topics.Dead, func() *hooklinev1.DeadLetter { return new(hooklinev1.DeadLetter) }); len(dead) != 0 {
		t.Fatalf("dead letters %v; a blocked head is not dead-lettered", dead)
	}
	var blocked []*hooklinev1.AttemptResult
	for _, r := range kafkatest.DecodeTopic(t, outs, f.s.topics.Results, func() *hooklinev1.AttemptResult { return new(hooklinev1.AttemptResult) }) {
		if r.GetState() == hooklinev1.DeliveryState_DELIVERY_STATE_BLOCKED {
			blocked = append(blocked, r)
		}
	}
	if len(blocked) != 1 || blocked[0].GetDeliveryId() != "dlv_a0" || blocked[0].GetClass() != hooklinev1.OutcomeClass_OUTCOME_CLASS_PERMANENT || blocked[0].GetStatusCode() != 400 {
		t.Fatalf("blocked results %v; want dlv_a0's attempt, class permanent, 400", blocked)
	}
	notices := kafkatest.DecodeTopic(t, outs, f.s.topics.Notices, func() *hooklinev1.Notice { return new(hooklinev1.Notice) })
	if len(notices) != 1 || notices[0].GetType() != hooklinev1.NoticeType_NOTICE_TYPE_LANE_BLOCKED || notices[0].GetOrderingKey() != "a" ||
		notices[0].GetDeliveryId() != "dlv_a0" || notices[0].GetEndpointId() != "ep_1" || notices[0].GetDetail() == "" {
		t.Fatalf("notices %v; want one lane.blocked for key a, dlv_a0, with a reason", notices)
	}
	recs := kafkatest.DecodeTopic(t, outs, f.s.topics.Lanes, func() *hooklinev1.LaneRecord { return new(hooklinev1.LaneRecord) })
	if len(recs) != 1 || recs[0].GetOrderingKey() != "a" || len(recs[0].GetOutside()) != 1 {
		t.Fatalf("lanes records %v; want lane a with its blocked head", recs)
	}
	head := recs[0].GetOutside()[0]
	ref := head.GetBlocked().GetDeliveryRecord()
	if head.GetDeliveryId() != "dlv_a0" || head.GetLaneSeq() != 0 || head.GetBlocked().GetDelivery().GetDeliveryId() != "dlv_a0" ||
		len(head.GetBlocked().GetDelivery().GetPayload()) != 0 || ref.GetTopic() != f.s.topics.Deliveries || ref.GetOffset() != 0 ||
		head.GetBlocked().GetLastResult().GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_BLOCKED {
		t.Fatalf("lane member %v; want dlv_a0 blocked at lane_seq 0 with its delivery (by reference: no payload) and last result", head)
	}
	// Blocked is until an operator acts: --max-hold does not end it.
	f.e.ord.expireOrdered(f.s.now().Add(time.Hour), f.s.now())
	if out := f.e.f.lanes["ep_1"].ord.keys["a"].outside["dlv_a0"]; out.blocked == nil {
		t.Fatal("expiry dropped the blocked head")
	}
	f.e.runDry(t)
	if got := f.rx.received(); slices.Contains(got, `"a1"`) {
		t.Fatalf("receiver got %v after an expiry sweep; a1 must still wait", got)
	}
}

// TestABlockedLaneSurvivesADispatcherRestart: a new owner seeded from the
// lanes topic sees the lane blocked and does not deliver its followers,
// which it reads again from the watermark.
func TestABlockedLaneSurvivesADispatcherRestart(t *testing.T) {
	f := newBlockFixture(t)
	f.publish(t, "a", 0, 0)
	f.e.runDry(t)
	lanesRecs := slices.DeleteFunc(f.e.commitNow(), func(r *kgo.Record) bool { return r.Topic != f.s.topics.Lanes })
	f.restart(t, lanesRecs)
	f.publish(t, "a", 1, 1)
	f.publish(t, "b", 0, 2)
	f.e.runDry(t)
	if got := f.rx.received(); fmt.Sprint(got) != `["a0" "b0"]` {
		t.Fatalf("receiver got %v; want a0 (before the restart), b0, and a1 held behind the blocked head", got)
	}
	if f.e.f.lanes["ep_1"].ord.keys["a"].outside["dlv_a0"].blocked == nil {
		t.Fatal("the new owner does not see dlv_a0 blocked")
	}
}

// TestSkippingABlockedHeadDeadLettersItAndReleasesTheLaneInOrder.
func TestSkippingABlockedHeadDeadLettersItAndReleasesTheLaneInOrder(t *testing.T) {
	f := newBlockFixture(t)
	f.blockedLane(t)
	f.command(t, hooklinev1.LaneOp_LANE_OP_SKIP, "a", "dlv_a0", 5)
	f.e.runDry(t)
	outs := f.e.commitNow()
	if got := f.rx.received(); fmt.Sprint(got[3:]) != `["a1" "a2"]` {
		t.Fatalf("receiver got %v; want a1 then a2 after the skip", got)
	}
	dead := kafkatest.DecodeTopic(t, outs, f.s.topics.Dead, func() *hooklinev1.DeadLetter { return new(hooklinev1.DeadLetter) })
	if len(dead) != 1 || dead[0].GetDelivery().GetDeliveryId() != "dlv_a0" || string(dead[0].GetDelivery().GetPayload()) != `"a0"` ||
		dead[0].GetLastResult().GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_FAILED {
		t.Fatalf("dead letters %v; want dlv_a0, FAILED, with its payload", dead)
	}
	recs := map[string]bool{}
	for _, r := range outs {
		if r.Topic == f.s.topics.Lanes {
			recs[string(r.Key)] = r.Value == nil
		}
	}
	if tomb, ok := recs[lanes.RecordKey("ep_1", "a")]; !ok || !tomb {
		t.Fatalf("lanes records %v; want lane a's tombstone", recs)
	}
}

// TestResendingABlockedHeadAttemptsItAgainAndTheFollowersFollow: a
// resend writes the head back with a fresh budget; the lane stays behind
// it until it comes back (its followers, spilled while it was blocked,
// come back first and wait); delivered, its followers go in order.
func TestResendingABlockedHeadAttemptsItAgainAndTheFollowersFollow(t *testing.T) {
	f := newBlockFixture(t)
	f.blockedLane(t)
	// The followers held the partition back: spilled, in order (as
	// relief does after --stuck-after).
	f.e.sp.spillLane(f.e.f.lanes["ep_1"], f.s.now())
	f.command(t, hooklinev1.LaneOp_LANE_OP_RESEND, "a", "dlv_a0", 5)
	f.e.runDry(t)
	outs := f.e.commitNow()
	back := kafkatest.DecodeTopic(t, outs, f.s.topics.Deliveries, func() *hooklinev1.Delivery { return new(hooklinev1.Delivery) })
	if len(back) != 1 || back[0].GetDeliveryId() != "dlv_a0" || back[0].GetAttempt() != 1 || back[0].GetLaneSeq() != 0 ||
		back[0].GetGiveUpAt() != nil || string(back[0].GetPayload()) != `"a0"` {
		t.Fatalf("resent %v; want dlv_a0 at attempt 1, lane_seq 0, no give-up time yet, with its payload", back)
	}
	spilled := kafkatest.DecodeTopic(t, outs, f.s.topics.Retries, func() *hooklinev1.Delivery { return new(hooklinev1.Delivery) })
	if len(spilled) != 2 {
		t.Fatalf("spilled %v; want a1 and a2", spilled)
	}
	recs := kafkatest.DecodeTopic(t, outs, f.s.topics.Lanes, func() *hooklinev1.LaneRecord { return new(hooklinev1.LaneRecord) })
	if len(recs) != 1 || len(recs[0].GetOutside()) != 3 || recs[0].GetOutside()[0].GetDeliveryId() != "dlv_a0" || recs[0].GetOutside()[0].GetBlocked() != nil {
		t.Fatalf("lanes records %v; want dlv_a0 outside, no longer blocked, then a1 and a2", recs)
	}
	if got := f.rx.received(); len(got) != 3 {
		t.Fatalf("receiver got %v; nothing more before the head comes back", got)
	}
	f.rx.set(`"a0"`, http.StatusOK) // the receiver was fixed
	for i, d := range spilled {
		d.DueAt = nil
		f.e.placeAt(t, d, int64(6+i))
	}
	f.e.runDry(t)
	if got := f.rx.received(); len(got) != 3 {
		t.Fatalf("receiver got %v; the followers came back first and must wait for the head", got)
	}
	f.e.placeAt(t, back[0], 8)
	f.e.runDry(t)
	if got := f.rx.received(); fmt.Sprint(got[3:]) != `["a0" "a1" "a2"]` {
		t.Fatalf("receiver got %v; want a0 again, then a1, a2", got)
	}
}

// TestAStaleLaneCommandDoesNothing: a command naming a delivery that is
// not the blocked head writes nothing and leaves the lane blocked.
func TestAStaleLaneCommandDoesNothing(t *testing.T) {
	f := newBlockFixture(t)
	f.blockedLane(t)
	f.command(t, hooklinev1.LaneOp_LANE_OP_SKIP, "a", "dlv_a1", 5)
	f.command(t, hooklinev1.LaneOp_LANE_OP_SKIP, "b", "dlv_b0", 6)
	f.e.runDry(t)
	if outs := f.e.commitNow(); len(outs) != 0 {
		t.Fatalf("stale commands wrote %d records", len(outs))
	}
	if got := f.rx.received(); len(got) != 3 || f.e.f.lanes["ep_1"].ord.keys["a"].outside["dlv_a0"].blocked == nil {
		t.Fatalf("receiver got %v; the lane must stay blocked", got)
	}
}

// TestASkipEndpointStillDeadLettersItsHead: on_head_failure skip (the
// default) is unchanged.
func TestASkipEndpointStillDeadLettersItsHead(t *testing.T) {
	f := newBlockFixture(t)
	f.ep.Endpoint.OnHeadFailure = hooklinev1.HeadFailure_HEAD_FAILURE_SKIP
	f.s.store.Put(f.ep)
	outs := f.blockedLane(t)
	if dead := kafkatest.DecodeTopic(t, outs, f.s.topics.Dead, func() *hooklinev1.DeadLetter { return new(hooklinev1.DeadLetter) }); len(dead) != 1 {
		t.Fatalf("dead letters %v; want a0's", dead)
	}
	if got := f.rx.received(); len(got) != 5 {
		t.Fatalf("receiver got %v; want every delivery", got)
	}
}

// TestMembersArrivingBehindABlockedHeadWaitOutsideMemory: a member that
// arrives behind a blocked head is parked at once (in the parked topic,
// with its place, marked with its lane for the scheduler, which releases
// it when the lane is unblocked), so it never holds the partition's
// watermark, and it is written once for the whole block, not once every
// --park-recheck.
func TestMembersArrivingBehindABlockedHeadWaitOutsideMemory(t *testing.T) {
	f := newBlockFixture(t)
	f.blockedLane(t)
	f.e.sp.spillLane(f.e.f.lanes["ep_1"], f.s.now())
	f.e.commitNow()
	f.publish(t, "a", 3, 5)
	f.publish(t, "b", 2, 6)
	f.e.runDry(t)
	outs := f.e.commitNow()
	if retried := kafkatest.DecodeTopic(t, outs, f.s.topics.Retries, newDelivery); len(retried) != 0 {
		t.Fatalf("written to the retries topic: %v; want nothing (a member behind a blocked head waits parked)", retried)
	}
	var parked []*kgo.Record
	for _, r := range outs {
		if r.Topic == f.s.topics.Parked {
			parked = append(parked, r)
		}
	}
	if len(parked) != 1 {
		t.Fatalf("%d parked records; want dlv_a3's", len(parked))
	}
	var d hooklinev1.Delivery
	if err := proto.Unmarshal(parked[0].Value, &d); err != nil {
		t.Fatal(err)
	}
	key, behind := lanes.ParkedBehind(parked[0])
	if d.GetDeliveryId() != "dlv_a3" || d.GetKind() != hooklinev1.DeliveryKind_DELIVERY_KIND_DEFERRED || d.GetLaneSeq() != 5 ||
		!behind || key != "a" || d.GetParkedAt() != nil || len(d.GetPayload()) != 0 || d.GetPayloadRecord() == nil ||
		!d.GetDueAt().AsTime().Equal(d.GetHeldSince().AsTime().Add(f.s.cfg.MaxHold)) {
		t.Fatalf("parked %v (behind lane %q: %v); want dlv_a3, deferred with lane_seq 5, by reference, behind lane \"a\", due at the end of its hold", &d, key, behind)
	}
	if got := f.rx.received(); got[len(got)-1] != `"b2"` || slices.Contains(got, `"a3"`) {
		t.Fatalf("receiver got %v; want b2 delivered and a3 held", got)
	}
	if l := f.e.f.lanes["ep_1"]; l.queued != 0 {
		t.Fatalf("%d deliveries wait in memory; want none", l.queued)
	}
}

// TestACopyOfABlockedHeadDoesNotUnblockItsLane: the head's record read
// again by a dispatcher that does not remember it (a publish retried
// with its idempotency key, after a restart) is not attempted and leaves
// the lane blocked.
func TestACopyOfABlockedHeadDoesNotUnblockItsLane(t *testing.T) {
	f := newBlockFixture(t)
	outs := f.blockedLane(t)
	f.restart(t, slices.DeleteFunc(outs, func(r *kgo.Record) bool { return r.Topic != f.s.topics.Lanes }))
	f.publish(t, "a", 0, 5) // dlv_a0 again, as ingest wrote it
	f.e.runDry(t)
	if got := f.rx.received(); len(got) != 3 {
		t.Fatalf("receiver got %v; the copy must not be attempted", got)
	}
	if f.e.f.lanes["ep_1"].ord.keys["a"].outside["dlv_a0"].blocked == nil {
		t.Fatal("the copy unblocked the lane")
	}
}

// TestAResendOfAHeadPastRetentionReleasesTheLane: a blocked head whose
// record is no longer retained cannot be resent: the lane is released as
// by a skip, the dead letter (without the payload) says why.
func TestAResendOfAHeadPastRetentionReleasesTheLane(t *testing.T) {
	f := newBlockFixture(t)
	f.blockedLane(t)
	delete(f.log, 0) // retention deleted a0's record
	f.command(t, hooklinev1.LaneOp_LANE_OP_RESEND, "a", "dlv_a0", 5)
	f.e.runDry(t)
	outs := f.e.commitNow()
	dead := kafkatest.DecodeTopic(t, outs, f.s.topics.Dead, func() *hooklinev1.DeadLetter { return new(hooklinev1.DeadLetter) })
	if len(dead) != 1 || dead[0].GetDelivery().GetDeliveryId() != "dlv_a0" || len(dead[0].GetDelivery().GetPayload()) != 0 ||
		!strings.Contains(dead[0].GetLastResult().GetReason(), "no longer retained") {
		t.Fatalf("dead letters %v; want dlv_a0 without its payload, saying it was no longer retained", dead)
	}
	if got := f.rx.received(); fmt.Sprint(got[3:]) != `["a1" "a2"]` || f.reads != 1 {
		t.Fatalf("receiver got %v after %d reads; want a1 then a2 after one read", got, f.reads)
	}
}

// TestAMemberThatWouldOverflowItsLanesRecordIsSetAside (issue 24 item 1):
// a lane's record is sized when a member settles outside: one that would
// take it over the record limit ends FAILED and dead-lettered, before
// the transaction, instead of aborting every commit; the lane goes on.
// And a lanes record a broker refuses is blamed on its blocked head.
func TestAMemberThatWouldOverflowItsLanesRecordIsSetAside(t *testing.T) {
	f := newBlockFixture(t)
	f.blockedLane(t)
	f.e.sp.spillLane(f.e.f.lanes["ep_1"], f.s.now()) // a1, a2 outside: the watermark passes them
	k := f.e.f.lanes["ep_1"].ord.keys["a"]
	for i := range recordLimit/memberBound + 10 {
		k.outside[fmt.Sprintf("dlv_%060d", i)] = outsider{seq: int64(1000 + i), until: f.s.now().Add(time.Hour)}
	}
	f.publish(t, "a", 3, 5) // behind the blocked head: spilled, so outside
	f.e.runDry(t)
	outs := f.e.commitNow()
	for _, r := range outs {
		if why := hkafka.OverLimit(r); why != "" {
			t.Fatalf("handed on: %s", why)
		}
	}
	dead := kafkatest.DecodeTopic(t, outs, f.s.topics.Dead, func() *hooklinev1.DeadLetter { return new(hooklinev1.DeadLetter) })
	if len(dead) != 1 || dead[0].GetDelivery().GetDeliveryId() != "dlv_a3" || dead[0].GetLastResult().GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_FAILED ||
		!strings.Contains(dead[0].GetLastResult().GetReason(), "lane's record") {
		t.Fatalf("dead letters %v; want dlv_a3 FAILED, its lane's record over the limit", dead)
	}
	if _, ok := k.outside["dlv_a3"]; ok {
		t.Fatal("the member set aside is still outside")
	}

	rec, _ := hkafka.Record(f.s.topics.Lanes, lanes.RecordKey("ep_1", "a"), &hooklinev1.LaneRecord{EndpointId: "ep_1", OrderingKey: "a",
		Outside: []*hooklinev1.LaneMember{{DeliveryId: "dlv_a1", LaneSeq: 1}, {DeliveryId: "dlv_a0", LaneSeq: 0, Blocked: &hooklinev1.BlockedHead{}}}})
	if reason := f.s.writer.classifyAbort([]refused{{R: rec, Err: kerrMessageTooLarge}}, f.s.now()); reason != hkafka.AbortUnwritable || f.s.writer.unwritable.Reason("dlv_a0") == "" {
		t.Fatalf("a refused lanes record: abort %q, blamed %q; want unwritable, its blocked head", reason, f.s.writer.unwritable.Reason("dlv_a0"))
	}
}

// TestAReleasedMemberNoLongerHoldsItsLane: a member outside its lane (a
// retry) that the scheduler set aside on its way back comes back as a
// release command (LANE_OP_RELEASE): the lane stops waiting for it, its
// followers go on in order, and the lanes topic drops it with the
// command's offset.
func TestAReleasedMemberNoLongerHoldsItsLane(t *testing.T) {
	f := newBlockFixture(t)
	f.rx.set(`"a0"`, http.StatusServiceUnavailable) // retried: outside, not blocked
	f.blockedLane(t)
	if got := f.rx.received(); slices.Contains(got, `"a1"`) || slices.Contains(got, `"a2"`) {
		t.Fatalf("receiver got %v; a1 and a2 must wait for a0", got)
	}
	f.command(t, hooklinev1.LaneOp_LANE_OP_RELEASE, "a", "dlv_a0", 5)
	f.e.runDry(t)
	outs := f.e.commitNow()
	got := f.rx.received()
	i, j := slices.Index(got, `"a1"`), slices.Index(got, `"a2"`)
	if i < 0 || j < i {
		t.Fatalf("receiver got %v; want a1 then a2 once a0 is released", got)
	}
	key := lanes.RecordKey("ep_1", "a")
	tomb := slices.IndexFunc(outs, func(r *kgo.Record) bool { return r.Topic == f.s.topics.Lanes && string(r.Key) == key && r.Value == nil })
	if tomb < 0 {
		t.Fatalf("no tombstone for lane %s among %d records; the released member must leave the lanes topic", key, len(outs))
	}
}

// TestAReleaseOfABlockedHeadDoesNothing: blocked heads never travel
// through the scheduler, so a release naming one is stale.
func TestAReleaseOfABlockedHeadDoesNothing(t *testing.T) {
	f := newBlockFixture(t)
	f.blockedLane(t)
	f.command(t, hooklinev1.LaneOp_LANE_OP_RELEASE, "a", "dlv_a0", 5)
	f.e.runDry(t)
	if outs := f.e.commitNow(); len(outs) != 0 {
		t.Fatalf("a stale release wrote %d records", len(outs))
	}
	if got := f.rx.received(); len(got) != 3 || f.e.f.lanes["ep_1"].ord.keys["a"].outside["dlv_a0"].blocked == nil {
		t.Fatalf("receiver got %v; the lane must stay blocked", got)
	}
}
