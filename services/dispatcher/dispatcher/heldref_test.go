package dispatcher

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/kafkatest"
	"github.com/hookline/hookline/platform/payloadref"
	"github.com/hookline/hookline/sdk/sign"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestAHeldDeliveryIsHeldByReferenceAndReadBackBeforeItsAttempt: a
// paused endpoint's delivery is parked without its payload, naming the
// record that carries it; when it comes back after the resume the
// payload is read back and sent as published. A payload no longer in
// Kafka ends the delivery FAILED with a dead letter, without an
// attempt; a read that fails otherwise holds it again.
func TestAHeldDeliveryIsHeldByReferenceAndReadBackBeforeItsAttempt(t *testing.T) {
	var requests atomic.Int32
	var body atomic.Value
	rx := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		b := make([]byte, r.ContentLength)
		_, _ = r.Body.Read(b)
		body.Store(string(b))
	}))
	defer rx.Close()
	s := newTestService(t)
	ep := endpoint(rx.URL, sign.GenerateSecret())
	ep.Endpoint.Status = hooklinev1.EndpointStatus_ENDPOINT_STATUS_PAUSED
	s.store.Put(ep)
	orig := deliveryRecord(t, s)
	orig.Partition, orig.Offset = 2, 41

	out := s.handler.handleSafely(t.Context(), orig)
	held := kafkatest.DecodeTopic(t, out, s.topics.Parked, newDelivery)
	if len(held) != 1 || len(held[0].GetPayload()) != 0 || held[0].GetPayloadRecord().GetOffset() != 41 || held[0].GetPayloadRecord().GetPartition() != 2 {
		t.Fatalf("parked as %v; want one record without the payload naming 2@41", held)
	}
	// Back from the scheduler (a view that saw a resume too early), paused
	// still: parked again, same reference.
	held[0].DueAt, held[0].ParkedAt = nil, nil
	back, _ := hkafka.Record(s.topics.Deliveries, "ep_1", held[0])
	back.Offset = 90
	again := kafkatest.DecodeTopic(t, s.handler.handleSafely(t.Context(), back), s.topics.Parked, newDelivery)
	if len(again) != 1 || len(again[0].GetPayload()) != 0 || again[0].GetPayloadRecord().GetOffset() != 41 {
		t.Fatalf("held again as %v; want the same reference (2@41), no payload", again)
	}

	ep.Endpoint.Status = hooklinev1.EndpointStatus_ENDPOINT_STATUS_ACTIVE
	ep.Version++
	s.store.Put(ep)
	again[0].DueAt, again[0].ParkedAt = nil, nil // released by the scheduler: due now
	back, _ = hkafka.Record(s.topics.Deliveries, "ep_1", again[0])
	read := func(err error) func(context.Context, *hooklinev1.RecordRef) (*kgo.Record, error) {
		return func(_ context.Context, ref *hooklinev1.RecordRef) (*kgo.Record, error) {
			if err != nil {
				return nil, err
			}
			if ref.GetTopic() != orig.Topic || ref.GetPartition() != 2 || ref.GetOffset() != 41 {
				return nil, payloadref.ErrGone
			}
			return orig, nil
		}
	}
	s.holds.readRecord = read(errors.New("broker unavailable"))
	if res := kafkatest.DecodeTopic(t, s.handler.handleSafely(t.Context(), back), s.topics.Retries, newDelivery); len(res) != 1 || requests.Load() != 0 {
		t.Fatalf("payload read failed: %d held records, %d requests; want held again, no attempt", len(res), requests.Load())
	}
	s.holds.readRecord = read(payloadref.ErrGone)
	gone := s.handler.handleSafely(t.Context(), back)
	if res := kafkatest.DecodeTopic(t, gone, s.topics.Results, newResult); len(res) != 1 || res[0].GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_FAILED || requests.Load() != 0 {
		t.Fatalf("payload gone: results %v, %d requests; want FAILED without an attempt", res, requests.Load())
	}
	s.holds.readRecord = read(nil)
	out = s.handler.handleSafely(t.Context(), back)
	if res := kafkatest.DecodeTopic(t, out, s.topics.Results, newResult); len(res) != 1 || res[0].GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED {
		t.Fatalf("after the resume: results %v; want DELIVERED", res)
	}
	if got := body.Load(); requests.Load() != 1 || got != `{}` {
		t.Fatalf("%d requests with body %q; want one with the payload as published", requests.Load(), got)
	}
}
