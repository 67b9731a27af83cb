package dispatcher

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/lanes"
	"github.com/hookline/hookline/sdk/sign"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
)

// lanesOf builds a commit's outputs as commit does and returns its
// lanes records by key (nil value: a tombstone).
func (e *engine) lanesOf(t *testing.T) map[string]*hooklinev1.LaneRecord {
	t.Helper()
	var outs []*kgo.Record
	for _, pw := range e.w.parts {
		outs, _, _ = e.w.popDone(pw, e.s.now(), outs)
	}
	outs = e.c.lanes.outputs(outs)
	e.c.lanes.ended(true)
	got := map[string]*hooklinev1.LaneRecord{}
	for _, r := range outs {
		if r.Topic != e.s.topics.Lanes {
			continue
		}
		var rec *hooklinev1.LaneRecord
		if r.Value != nil {
			rec = new(hooklinev1.LaneRecord)
			if err := hkafka.Decode(r, rec); err != nil {
				t.Fatal(err)
			}
		}
		got[string(r.Key)] = rec
	}
	return got
}

// TestTheLanesTopicFollowsTheWatermark: a head out on a retry is written
// to the lanes topic with the commit that passes it; when it comes back
// at a later offset while its follower still holds the watermark, the
// lanes topic keeps it listed (a restart from the watermark must still
// hold the follower), and only the commit that passes its return writes
// it off.
func TestTheLanesTopicFollowsTheWatermark(t *testing.T) {
	var calls atomic.Int32
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer rx.Close()
	s := newTestService(t)
	ep := endpoint(rx.URL, sign.GenerateSecret())
	ep.Endpoint.Ordering = hooklinev1.Ordering_ORDERING_PER_ENDPOINT
	ep.Endpoint.OutageModeDisabled = true
	retriesIn(ep, time.Second) // dlv_1 waits for dlv_0 in memory
	s.store.Put(ep)
	e := testEngine(t, s)
	key := lanes.RecordKey("ep_1", "")

	e.pollN(t, 0, 0, 2) // dlv_0 (fails once), dlv_1
	e.runDry(t)
	if got := e.lanesOf(t)[key]; len(got.GetOutside()) != 1 || got.GetOutside()[0].GetDeliveryId() != "dlv_0" || got.GetOutside()[0].GetLaneSeq() != 0 {
		t.Fatalf("first commit's lane record %v; want dlv_0 outside at lane_seq 0", got)
	}
	// dlv_0 comes back at offset 5, placed but not yet started: dlv_1
	// (offset 1) still holds the watermark.
	back := &hooklinev1.Delivery{DeliveryId: "dlv_0", EventId: "evt", TenantId: "t", EndpointId: "ep_1", EventType: "a.b", Payload: []byte(`{}`), Attempt: 2}
	lseq := int64(0)
	back.LaneSeq = &lseq
	e.placeAt(t, back, 5)
	if got, ok := e.lanesOf(t)[key]; ok {
		t.Fatalf("a commit below the return wrote %v; the lane must stay as committed", got)
	}
	if k := e.f.lanes["ep_1"].ord.keys[""]; k.committed["dlv_0"].GetLaneSeq() != 0 || len(k.committed) != 1 {
		t.Fatalf("committed %v; want dlv_0 still outside as of the watermark", k.committed)
	}
	e.runDry(t) // dlv_0 delivered, then dlv_1
	if got, ok := e.lanesOf(t)[key]; !ok || got != nil {
		t.Fatalf("lane record %v (written %v); want a tombstone once the watermark passes the return", got, ok)
	}
	if calls.Load() != 3 {
		t.Fatalf("%d attempts, want 3", calls.Load())
	}
}

// TestALaneWithNothingOutsideWritesNoLaneRecord: deliveries of an
// ordered endpoint that succeed at once change no lane's outside list,
// so their commits write nothing to the lanes topic (found by the
// badlane bench: 1.5 lanes records, tombstones and their transaction
// markers, for every healthy delivery ordered per key).
func TestALaneWithNothingOutsideWritesNoLaneRecord(t *testing.T) {
	_, e := orderedEngine(t, failingOn(t, `"never"`), hooklinev1.Ordering_ORDERING_PER_KEY)
	for i := range 4 {
		e.placeAt(t, &hooklinev1.Delivery{DeliveryId: fmt.Sprint("dlv_", i), EventId: "evt", TenantId: "t", EndpointId: "ep_1", EventType: "a.b",
			Payload: []byte(`{}`), Attempt: 1, OrderingKey: fmt.Sprint("k", i%2)}, int64(i))
	}
	e.runDry(t)
	if got := e.lanesOf(t); len(got) != 0 {
		t.Fatalf("lanes records %v written for deliveries that never went outside; want none", got)
	}
}

// TestALaneCommitWritesTakesBackAndGivesBackItsLaneChanges: the lane
// changes of the entries a commit popped move their keyLane's committed
// list and write its record once; an abort takes the list back, and the
// changes go back to the entries of owned partitions (to be committed
// again); an unchanged lane writes nothing.
func TestALaneCommitWritesTakesBackAndGivesBackItsLaneChanges(t *testing.T) {
	s := newTestService(t)
	c := laneCommit{topic: s.topics.Lanes, writer: s.writer}
	o := &ordering{keys: map[string]*keyLane{}}
	d0 := &hooklinev1.LaneMember{DeliveryId: "d0", LaneSeq: 0}
	d1 := &hooklinev1.LaneMember{DeliveryId: "d1", LaneSeq: 1}
	k := &keyLane{lane: &lane{id: "ep_1", ord: o}, key: "a", committed: lanes.Members{"d0": d0}, outside: map[string]outsider{}}
	pw := &partWindow{}
	// d1 goes outside, d0 comes back in.
	e1 := &entry{part: pw, d: &hooklinev1.Delivery{DeliveryId: "d1"}}
	e0 := &entry{part: pw, d: &hooklinev1.Delivery{DeliveryId: "d0"}}
	pop := func() {
		for _, en := range []*entry{e1, e0} {
			if en.opKey != nil {
				c.add(en)
			}
		}
	}
	e1.opKey, e1.opMember, e0.opKey, k.pending = k, d1, k, 2
	if why, ok := c.fits(k, d1); !ok {
		t.Fatalf("a lane of two does not fit: %s", why)
	}
	pop()
	outs := c.outputs(nil)
	if len(outs) != 1 || outs[0].Topic != s.topics.Lanes || string(outs[0].Key) != lanes.RecordKey("ep_1", "a") {
		t.Fatalf("outputs %v, want the lane's one record", outs)
	}
	var rec hooklinev1.LaneRecord
	if err := hkafka.Decode(outs[0], &rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.GetOutside()) != 1 || rec.GetOutside()[0].GetDeliveryId() != "d1" {
		t.Fatalf("record says outside %v, want d1", rec.GetOutside())
	}
	if k.pending != 0 || e1.opKey != nil || e1.opMember != nil || k.committed["d1"] == nil || k.committed["d0"] != nil {
		t.Fatalf("pending %d, committed %v, d1's change %v; want none pending, d1 committed outside, the change taken", k.pending, k.committed, e1.opKey)
	}
	// Aborted: the list is taken back; the changes go back to their
	// entries, and the lane to its ordering if it was forgotten as idle.
	c.ended(false)
	if len(k.committed) != 1 || k.committed["d0"] == nil {
		t.Fatalf("committed %v after an abort, want d0 outside again", k.committed)
	}
	c.giveBack(func(p *partWindow) bool { return p == pw })
	c.dropOps()
	if e1.opKey != k || e1.opMember != d1 || e0.opKey != k || e0.opMember != nil || k.pending != 2 || o.keys["a"] != k {
		t.Fatalf("after give back: d1 %v/%v, d0 %v, pending %d, ordering %v; want both changes back", e1.opKey, e1.opMember, e0.opKey, k.pending, o.keys["a"])
	}
	// Committed the second time: kept.
	pop()
	if outs := c.outputs(nil); len(outs) != 1 {
		t.Fatalf("%d outputs committing again, want 1", len(outs))
	}
	c.ended(true)
	if len(k.committed) != 1 || k.committed["d1"] == nil {
		t.Fatalf("committed %v, want d1 outside", k.committed)
	}
	// A change to what is already committed writes nothing.
	e1.opKey, e1.opMember, k.pending = k, proto.Clone(d1).(*hooklinev1.LaneMember), 1
	c.dropOps()
	pop()
	if outs := c.outputs(nil); len(outs) != 0 {
		t.Fatalf("%d outputs for an unchanged lane, want none", len(outs))
	}
	c.ended(true)
}
