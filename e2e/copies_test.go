package e2e

import (
	"net/http"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/kafkatest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestACopyAfterADispatcherChangeIsNotAttemptedAgain (I28): a delivery
// record written twice by ingest (a publish retried with its idempotency
// key after its answer was lost) is attempted and ended once even when
// the dispatcher that took the original committed it and stopped before
// the copy was written: the dispatcher that takes the partition over
// reads the partition's recent past before its committed offset and
// knows the copy for one.
func TestACopyAfterADispatcherChangeIsNotAttemptedAgain(t *testing.T) {
	st := startStack(t)
	rx := newReceiver(t, http.StatusOK)
	ep := st.createEndpoint(rx.URL)
	first := st.publish("invoice.paid", `{"n":1}`)
	st.readN(st.topics.Results, 1)
	// Dispatcher A stops: what it finished is committed.
	st.dispatcher.halt()
	original := st.readN(st.topics.Deliveries, 1)[0]
	committed, err := st.admin.FetchOffsets(t.Context(), st.kafka.TopicPrefix+"dispatcher")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := committed.Lookup(st.topics.Deliveries, original.Partition); !ok || o.At <= original.Offset {
		t.Fatalf("dispatcher A did not commit past the original (committed %+v)", o)
	}

	// The copy: the same record again, later in the same partition.
	cp := &kgo.Record{Topic: original.Topic, Key: original.Key, Value: original.Value, Headers: original.Headers, Partition: original.Partition}
	if err := st.client.ProduceSync(t.Context(), cp).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if cp.Partition != original.Partition || cp.Offset <= original.Offset {
		t.Fatalf("copy at %d/%d, original at %d/%d; want later in the same partition", cp.Partition, cp.Offset, original.Partition, original.Offset)
	}

	// Dispatcher B takes over; a second event to the same endpoint (the
	// same partition, after the copy) shows it has gone past the copy.
	st.dispatcher.start(st, st.newDispatcher(15*time.Second).Run)
	second := st.publish("invoice.paid", `{"n":2}`)
	st.readN(st.topics.Results, 2)
	st.dispatcher.halt() // everything B finished is committed

	results, err := hkafka.ReadAll(t.Context(), st.kafka, st.topics.Results)
	if err != nil {
		t.Fatal(err)
	}
	ended := map[string]int{}
	for _, res := range kafkatest.Decode(t, results, func() *hooklinev1.AttemptResult { return &hooklinev1.AttemptResult{} }) {
		if res.GetEndpointId() == ep.GetEndpoint().GetId() {
			ended[res.GetDeliveryId()]++
		}
	}
	id1, id2 := first.GetDeliveries()[0].GetDeliveryId(), second.GetDeliveries()[0].GetDeliveryId()
	if ended[id1] != 1 || ended[id2] != 1 {
		t.Fatalf("results per delivery %v; want one for %s (its copy skipped) and one for %s", ended, id1, id2)
	}
	posts := map[string]int{}
	for _, p := range rx.got() {
		posts[p.header.Get("webhook-id")]++
	}
	if posts[first.GetEventId()] != 1 || posts[second.GetEventId()] != 1 {
		t.Fatalf("receiver POSTs per webhook-id %v; want one each for %s and %s", posts, first.GetEventId(), second.GetEventId())
	}
}
