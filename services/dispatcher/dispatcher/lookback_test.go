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
	if copyable(rec(first(), "")) != copyKey(first(), "") {
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
	} {
		if k := copyable(r); k != "" {
			t.Errorf("%s is remembered as %q", name, k)
		}
	}
}
