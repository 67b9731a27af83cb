package dispatcher

import (
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTheWindowChargesWhatADoneEntryHolds: a done entry waits for the
// watermark with its outputs (a deferral of a large payload carries it
// again), so the window's bytes are its record's charge plus its
// outputs, and popping it gives all of it back.
func TestTheWindowChargesWhatADoneEntryHolds(t *testing.T) {
	s := newTestService(t)
	w := newWindow(100, 1<<30)
	now := time.Now()
	payload := make([]byte, 1<<20)
	d := &hooklinev1.Delivery{DeliveryId: "dlv_1", TenantId: "t", EndpointId: "ep_1", Payload: payload, Attempt: 1}
	r, err := hkafka.Record(s.topics.Deliveries, "ep_1", d)
	if err != nil {
		t.Fatal(err)
	}
	en := w.add(r, now, t.Context())
	polled := w.bytes
	out, err := hkafka.Record(s.topics.Retries, "ep_1", d) // the deferral: the payload a third time
	if err != nil {
		t.Fatal(err)
	}
	w.finish(en, []*kgo.Record{out})
	if want := polled + int64(recordBytes(out)); w.bytes < want {
		t.Fatalf("window holds %d bytes with the entry done, want at least %d (its record %d + its output %d)", w.bytes, want, polled, recordBytes(out))
	}
	pw := w.parts[tp{r.Topic, r.Partition}]
	w.popDone(pw, now, nil)
	if w.bytes != 0 || w.records != 0 {
		t.Fatalf("after the commit pops it: %d bytes, %d records; want 0", w.bytes, w.records)
	}
}
