package dispatcher

import (
	"net/http"
	"net/http/httptest"
	"testing"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/kafkatest"
	"github.com/hookline/hookline/sdk/sign"
	"github.com/twmb/franz-go/pkg/kgo"
)

func newNotice() *hooklinev1.Notice { return &hooklinev1.Notice{} }

// transformedRecord is delivery id of ep_1 carrying t.
func transformedRecord(t *testing.T, s *Service, id string, tr *hooklinev1.Transformed) *kgo.Record {
	t.Helper()
	d := &hooklinev1.Delivery{DeliveryId: id, EventId: "evt_" + id, TenantId: "t", EndpointId: "ep_1", EventType: "a.b", Payload: []byte(`{"x":1}`), Attempt: 1, Transformed: tr}
	r, err := hkafka.Record(s.topics.Deliveries, "ep_1", d)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestCancelledTransformationEndsCancelledWithoutAnAttempt: a delivery
// its transformation cancelled ends CANCELLED, with no request, no dead
// letter and no notice.
func TestCancelledTransformationEndsCancelledWithoutAnAttempt(t *testing.T) {
	s := newTestService(t)
	rx := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("a cancelled delivery was attempted") }))
	defer rx.Close()
	s.store.Put(endpoint(rx.URL, sign.GenerateSecret()))
	out := s.handler.handleSafely(t.Context(), transformedRecord(t, s, "dlv_1", &hooklinev1.Transformed{Cancelled: true}))
	res := kafkatest.DecodeTopic(t, out, s.topics.Results, newResult)
	if len(res) != 1 || res[0].GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_CANCELLED {
		t.Fatalf("results %v; want one CANCELLED", res)
	}
	if n := len(kafkatest.DecodeTopic(t, out, s.topics.Dead, newDeadLetter)) + len(kafkatest.DecodeTopic(t, out, s.topics.Notices, newNotice)); n != 0 {
		t.Fatalf("a cancel wrote %d dead letters or notices", n)
	}
}

// TestTransformationFailingNoticeOncePerStreak: a failed transformation
// ends FAILED with a dead letter; the first of a streak adds one
// endpoint.transformation_failing notice (the error, the delivery id),
// the next ones none; an attempted delivery whose transformation
// succeeded, or a changed script, starts a new streak.
func TestTransformationFailingNoticeOncePerStreak(t *testing.T) {
	s := newTestService(t)
	var got *http.Request
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r }))
	defer rx.Close()
	ep := endpoint(rx.URL, sign.GenerateSecret())
	ep.Endpoint.Transformation = `function handler(w) { throw new Error("boom") }`
	s.store.Put(ep)
	failed := &hooklinev1.Transformed{Error: "transformation threw: Error: boom"}
	fail := func(id string) []*hooklinev1.Notice {
		t.Helper()
		out := s.handler.handleSafely(t.Context(), transformedRecord(t, s, id, failed))
		res := kafkatest.DecodeTopic(t, out, s.topics.Results, newResult)
		dead := kafkatest.DecodeTopic(t, out, s.topics.Dead, newDeadLetter)
		if len(res) != 1 || res[0].GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_FAILED || res[0].GetError() != failed.GetError() || len(dead) != 1 {
			t.Fatalf("%s: results %v, %d dead letters; want one FAILED with the error and a dead letter", id, res, len(dead))
		}
		return kafkatest.DecodeTopic(t, out, s.topics.Notices, newNotice)
	}
	n := fail("dlv_1")
	if len(n) != 1 || n[0].GetType() != hooklinev1.NoticeType_NOTICE_TYPE_TRANSFORMATION_FAILING || n[0].GetDetail() != failed.GetError() || n[0].GetDeliveryId() != "dlv_1" || n[0].GetTenantId() != "t" {
		t.Fatalf("first failure: notices %v; want one transformation_failing for dlv_1", n)
	}
	if n := fail("dlv_2"); len(n) != 0 {
		t.Fatalf("second failure of the streak: notices %v; want none", n)
	}

	// A delivery whose transformation succeeded is attempted with its
	// overrides, and ends the streak.
	out := s.handler.handleSafely(t.Context(), transformedRecord(t, s, "dlv_3", &hooklinev1.Transformed{Method: http.MethodPut, Headers: map[string]string{"X-Team": "billing"}}))
	if res := kafkatest.DecodeTopic(t, out, s.topics.Results, newResult); len(res) != 1 || res[0].GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED {
		t.Fatalf("transformed delivery: results %v; want DELIVERED", res)
	}
	if got == nil || got.Method != http.MethodPut || got.Header.Get("X-Team") != "billing" {
		t.Fatalf("request %v; want PUT with X-Team: billing", got)
	}
	if n := fail("dlv_4"); len(n) != 1 || n[0].GetDeliveryId() != "dlv_4" {
		t.Fatalf("failure after a success: notices %v; want one for dlv_4", n)
	}

	// A changed script is a new streak.
	ep.Endpoint.Transformation = `function handler(w) { throw new Error("boom again") }`
	ep.Version++
	s.store.Put(ep)
	if n := fail("dlv_5"); len(n) != 1 {
		t.Fatalf("failure of a changed script: notices %v; want one", n)
	}
	if n := fail("dlv_6"); len(n) != 0 {
		t.Fatalf("second failure of the changed script: notices %v; want none", n)
	}

	s.streaks.prune(func(id string) bool { return id == "ep_1" }) // as pruneState does once ep_1 is deleted
	if len(s.streaks.failing) != 0 {
		t.Fatalf("a deleted endpoint's streak is still kept: %v", s.streaks.failing)
	}
}
