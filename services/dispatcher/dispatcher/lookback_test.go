package dispatcher

import (
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestOnlyFirstAttemptsIngestWroteAreRememberedFromThePast: what an
// assignment reads of a partition's past is remembered only for records
// ingest may write a copy of; a retry, a deferral, a record not yet due
// when written (it comes back unchanged from the retries topic) or one
// put back after a worker fault must never be taken for a copy.
func TestOnlyFirstAttemptsIngestWroteAreRememberedFromThePast(t *testing.T) {
	rec := func(d *hooklinev1.Delivery, faults string) *kgo.Record {
		r, err := hkafka.Record("d", "ep_1", d)
		if err != nil {
			t.Fatal(err)
		}
		if faults != "" {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: headerFaults, Value: []byte(faults)})
		}
		return r
	}
	first := func() *hooklinev1.Delivery {
		return &hooklinev1.Delivery{DeliveryId: "dlv_a", EndpointId: "ep_1", Attempt: 1, Kind: hooklinev1.DeliveryKind_DELIVERY_KIND_FIRST}
	}
	if orig := rec(first(), ""); copyable(orig) != recordCopyKey(orig, first()) {
		t.Fatal("a first attempt ingest wrote is not remembered under the key place looks up")
	}
	due := first()
	due.DueAt = timestamppb.New(time.Now().Add(time.Hour))
	retry := first()
	retry.Attempt, retry.Kind = 2, hooklinev1.DeliveryKind_DELIVERY_KIND_RETRY
	deferred := first()
	deferred.Kind = hooklinev1.DeliveryKind_DELIVERY_KIND_DEFERRED
	for name, r := range map[string]*kgo.Record{
		"not yet due":    rec(due, ""),
		"a retry":        rec(retry, ""),
		"a deferral":     rec(deferred, ""),
		"put back":       rec(first(), "1"),
		"not a delivery": {Value: []byte("garbage")},
		"interrupted":    requeue(&kgo.Record{Key: []byte("ep_1"), Value: rec(first(), "").Value, Partition: 2, Offset: 7}, "d"),
	} {
		if k := copyable(r); k != "" {
			t.Errorf("%s is remembered as %q", name, k)
		}
	}
}

// TestAPutBackRecordIsNotACopyOfItsOriginal: an attempt interrupted by a
// shutdown puts its record back unchanged at a later offset, and the
// shutdown's commit moves the watermark past the original. The next
// owner remembers the original from the partition's past (lookback.go):
// the record put back must not share the original's copy key, or it is
// skipped and the delivery lost (TestDispatcherCrashWithOutOfOrderCompletionsLosesNothing
// found it).
func TestAPutBackRecordIsNotACopyOfItsOriginal(t *testing.T) {
	d := &hooklinev1.Delivery{DeliveryId: "dlv_a", EndpointId: "ep_1", Attempt: 1, Kind: hooklinev1.DeliveryKind_DELIVERY_KIND_FIRST}
	orig, err := hkafka.Record("d", "ep_1", d)
	if err != nil {
		t.Fatal(err)
	}
	orig.Partition, orig.Offset = 2, 7
	back := requeue(orig, "d")
	back.Partition, back.Offset = 2, 19
	if recordCopyKey(back, d) == recordCopyKey(orig, d) {
		t.Fatal("a record put back has its original's copy key: the next owner would skip it as a copy")
	}
	again := requeue(back, "d") // put back twice: still not a copy of the first put-back
	if recordCopyKey(again, d) == recordCopyKey(back, d) {
		t.Fatal("a record put back twice has the first put-back's copy key")
	}
}
