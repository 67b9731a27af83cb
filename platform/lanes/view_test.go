package lanes

import (
	"testing"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

func record(t *testing.T, rec *hooklinev1.LaneRecord) *kgo.Record {
	t.Helper()
	r, err := hkafka.Record("lanes", RecordKey(rec.GetEndpointId(), rec.GetOrderingKey()), rec)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestLaneRecordKeysRoundTripAndTheViewAppliesTombstones(t *testing.T) {
	for _, c := range [][2]string{{"ep_1", ""}, {"ep_1", "a:b"}, {"ep:x", "7"}} {
		ep, key, ok := ParseRecordKey(RecordKey(c[0], c[1]))
		if !ok || ep != c[0] || key != c[1] {
			t.Errorf("%q: parsed %q %q %v", c, ep, key, ok)
		}
	}
	if _, _, ok := ParseRecordKey("9:short"); ok {
		t.Error("a malformed key parsed")
	}
	v := NewView()
	v.Apply(record(t, &hooklinev1.LaneRecord{EndpointId: "ep_1", OrderingKey: "k",
		Outside: []*hooklinev1.LaneMember{{DeliveryId: "dlv_1", LaneSeq: 4}}}))
	if got := v.Snapshot("ep_1")["k"]["dlv_1"].GetLaneSeq(); got != 4 {
		t.Fatalf("snapshot %v", v.Snapshot("ep_1"))
	}
	v.Apply(&kgo.Record{Key: []byte(RecordKey("ep_1", "k"))})
	if got := v.Snapshot("ep_1"); got != nil {
		t.Fatalf("after the tombstone: %v", got)
	}
}

func TestBlockedListsBlockedLanesByKeyWithTheirFollowers(t *testing.T) {
	v := NewView()
	blocked := func(id string, seq int64) *hooklinev1.LaneMember {
		return &hooklinev1.LaneMember{DeliveryId: id, LaneSeq: seq, Blocked: &hooklinev1.BlockedHead{}}
	}
	v.Apply(record(t, &hooklinev1.LaneRecord{EndpointId: "ep_1", OrderingKey: "b",
		Outside: []*hooklinev1.LaneMember{blocked("dlv_b", 3), {DeliveryId: "dlv_b2", LaneSeq: 7}, {DeliveryId: "dlv_b3", LaneSeq: 9}}}))
	v.Apply(record(t, &hooklinev1.LaneRecord{EndpointId: "ep_1", OrderingKey: "a", Outside: []*hooklinev1.LaneMember{blocked("dlv_a", 1)}}))
	v.Apply(record(t, &hooklinev1.LaneRecord{EndpointId: "ep_1", OrderingKey: "c", Outside: []*hooklinev1.LaneMember{{DeliveryId: "dlv_c", LaneSeq: 2}}}))
	v.Apply(record(t, &hooklinev1.LaneRecord{EndpointId: "ep_2", OrderingKey: "a", Outside: []*hooklinev1.LaneMember{blocked("dlv_x", 1)}}))
	got := v.Blocked("ep_1", nil)
	if len(got) != 2 || got[0].Key != "a" || got[0].Head.GetDeliveryId() != "dlv_a" || got[0].Followers != 0 ||
		got[1].Key != "b" || got[1].Head.GetDeliveryId() != "dlv_b" || got[1].Followers != 2 {
		t.Fatalf("blocked lanes %+v; want a (no followers) then b (2 followers), not c (not blocked)", got)
	}
	after := "a"
	if got := v.Blocked("ep_1", &after); len(got) != 1 || got[0].Key != "b" {
		t.Fatalf("after %q: %+v", after, got)
	}
}

// TestTheViewHoldsNoPayloadOfAHeadKeptByReference: a blocked head written
// with its record's reference is held without its payload, whatever the
// record carried.
func TestTheViewHoldsNoPayloadOfAHeadKeptByReference(t *testing.T) {
	v := NewView()
	v.Apply(record(t, &hooklinev1.LaneRecord{EndpointId: "ep_1", Outside: []*hooklinev1.LaneMember{{DeliveryId: "dlv_1", Blocked: &hooklinev1.BlockedHead{
		Delivery:       &hooklinev1.Delivery{DeliveryId: "dlv_1", Payload: make([]byte, 1<<20)},
		DeliveryRecord: &hooklinev1.RecordRef{Topic: "deliveries", Offset: 7}}}}}))
	head := v.Snapshot("ep_1")[""]["dlv_1"].GetBlocked()
	if len(head.GetDelivery().GetPayload()) != 0 || head.GetDeliveryRecord().GetOffset() != 7 {
		t.Fatalf("held %d payload bytes, reference %v; want none, offset 7", len(head.GetDelivery().GetPayload()), head.GetDeliveryRecord())
	}
}

func TestBlockedBeforeSaysWhetherABlockedHeadPrecedesASeq(t *testing.T) {
	v := NewView()
	if v.BlockedBefore("ep_1", "k", 10) {
		t.Fatal("a lane the view does not hold is blocked")
	}
	v.Apply(record(t, &hooklinev1.LaneRecord{EndpointId: "ep_1", OrderingKey: "k", Outside: []*hooklinev1.LaneMember{
		{DeliveryId: "dlv_head", LaneSeq: 5, Blocked: &hooklinev1.BlockedHead{}},
		{DeliveryId: "dlv_f", LaneSeq: 7},
	}}))
	for _, c := range []struct {
		key  string
		seq  int64
		want bool
	}{{"k", 7, true}, {"k", 5, false}, {"k", 3, false}, {"other", 7, false}} {
		if got := v.BlockedBefore("ep_1", c.key, c.seq); got != c.want {
			t.Errorf("BlockedBefore(ep_1, %q, %d) = %v, want %v", c.key, c.seq, got, c.want)
		}
	}
	// The operator skips the head: the lane record lists the follower only.
	v.Apply(record(t, &hooklinev1.LaneRecord{EndpointId: "ep_1", OrderingKey: "k", Outside: []*hooklinev1.LaneMember{{DeliveryId: "dlv_f", LaneSeq: 7}}}))
	if v.BlockedBefore("ep_1", "k", 7) {
		t.Fatal("a lane whose head was skipped is still blocked")
	}
}
