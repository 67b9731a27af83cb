package health

import (
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestNoticeViewFollowsFailingAndRecoveredNotices: a failing notice (or
// reminder) is out until a recovered one follows; the view keeps when the
// last went out and whether it was written in outage mode, ignores what
// does not decode, and forgets deleted endpoints.
func TestNoticeViewFollowsFailingAndRecoveredNotices(t *testing.T) {
	v := NewNoticeView()
	at := time.Unix(1_700_000_000, 0)
	apply := func(typ hooklinev1.NoticeType, id string, when time.Time, outage bool) {
		t.Helper()
		r, err := hkafka.Record("notices", id, &hooklinev1.Notice{Type: typ, EndpointId: id, At: timestamppb.New(when), Outage: outage})
		if err != nil {
			t.Fatal(err)
		}
		v.Apply(r)
	}
	apply(hooklinev1.NoticeType_NOTICE_TYPE_ENDPOINT_FAILING, "ep", at, false)
	apply(hooklinev1.NoticeType_NOTICE_TYPE_ENDPOINT_FAILING, "ep", at.Add(time.Hour), true) // a reminder, in outage mode
	apply(hooklinev1.NoticeType_NOTICE_TYPE_ENDPOINT_FAILING, "gone", at, true)
	// A recovered notice for ep that does not decode changes nothing.
	garbled, _ := hkafka.Record("notices", "ep", &hooklinev1.Notice{Type: hooklinev1.NoticeType_NOTICE_TYPE_ENDPOINT_RECOVERED, EndpointId: "ep"})
	garbled.Value = []byte("not a notice")
	v.Apply(garbled)
	if failing, since, outage := v.Lookup("ep"); !failing || !since.Equal(at.Add(time.Hour)) || !outage {
		t.Fatalf("ep: failing %v since %v, outage %v; want failing since its reminder, in outage mode", failing, since, outage)
	}
	v.Prune(func(id string) bool { return id == "gone" })
	if failing, _, _ := v.Lookup("gone"); failing || v.Len() != 1 {
		t.Fatalf("a deleted endpoint kept: %d entries", v.Len())
	}
	apply(hooklinev1.NoticeType_NOTICE_TYPE_ENDPOINT_RECOVERED, "ep", at.Add(2*time.Hour), false)
	if failing, _, _ := v.Lookup("ep"); failing || v.Len() != 0 {
		t.Fatalf("ep still failing after endpoint.recovered (%d entries)", v.Len())
	}
}
