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
)

// lanesOf builds a commit's outputs as commit does and returns its
// lanes records by key (nil value: a tombstone).
func (e *engine) lanesOf(t *testing.T) map[string]*hooklinev1.LaneRecord {
	t.Helper()
	var outs []*kgo.Record
	for _, pw := range e.w.parts {
		outs, _, _ = e.w.popDone(pw, e.s.now(), outs)
	}
	outs = e.laneOutputs(outs)
	e.lanesCommitted(true)
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
