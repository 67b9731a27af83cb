package kafka

import (
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// FuzzDecodeRecords feeds arbitrary bytes, as a poison record on any
// Hookline topic would carry, to Decode for every record type a service
// reads from Kafka. Decode must return an error or a message, never panic;
// a message it returns must survive the getters consumers call on it and
// encode again (a consumer re-writes it to another topic).
func FuzzDecodeRecords(f *testing.F) {
	ts := timestamppb.New(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	seeds := []proto.Message{
		&hooklinev1.Delivery{DeliveryId: "dlv_1", EventId: "evt_1", TenantId: "t", EndpointId: "ep_1", EventType: "a.b", Payload: []byte(`{}`), Attempt: 3, DueAt: ts},
		&hooklinev1.EndpointRecord{Endpoint: &hooklinev1.Endpoint{Id: "ep_1", TenantId: "t", Url: "https://example.com/h", EventTypes: []string{"a.*"},
			RetryPolicy: &hooklinev1.RetryPolicy{MaxAttempts: 3, MaxAge: durationpb.New(1e9)}}, Version: 2},
		&hooklinev1.Notice{},
		&hooklinev1.AttemptResult{DeliveryId: "dlv_1", StatusCode: 503},
		&hooklinev1.DeadLetter{Delivery: &hooklinev1.Delivery{DeliveryId: "dlv_1"}},
		&hooklinev1.IdempotencyRecord{},
	}
	for _, m := range seeds {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(nil))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})       // a varint past 32 bits
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x07}) // a length beyond the value
	f.Add([]byte("{\"delivery_id\":\"dlv_1\"}"))      // JSON on a protobuf topic
	f.Fuzz(func(t *testing.T, value []byte) {
		r := &kgo.Record{Topic: "hookline.deliveries", Key: []byte("ep_1"), Value: value, Offset: 7}
		for _, m := range []proto.Message{
			&hooklinev1.Delivery{}, &hooklinev1.EndpointRecord{}, &hooklinev1.Notice{},
			&hooklinev1.AttemptResult{}, &hooklinev1.DeadLetter{}, &hooklinev1.IdempotencyRecord{},
		} {
			if err := Decode(r, m); err != nil {
				continue
			}
			switch v := m.(type) {
			case *hooklinev1.Delivery:
				_ = v.GetDueAt().AsTime()
				_ = v.GetGiveUpAt().AsTime()
				_ = v.GetDueAt().IsValid()
			case *hooklinev1.EndpointRecord:
				_ = v.GetEndpoint().GetRetryPolicy().GetMaxAge().AsDuration()
				_ = v.GetEndpoint().GetTimeout().AsDuration()
				for _, s := range v.GetSecrets() {
					_ = s.GetExpiresAt().AsTime()
				}
			case *hooklinev1.AttemptResult:
				_ = v.GetNextAttemptAt().AsTime()
			case *hooklinev1.DeadLetter:
				_ = v.GetDelivery().GetDueAt().AsTime()
			}
			b, err := proto.Marshal(m)
			if err != nil {
				t.Fatalf("%T decoded but does not encode again: %v", m, err)
			}
			again := m.ProtoReflect().New().Interface()
			if err := proto.Unmarshal(b, again); err != nil {
				t.Fatalf("%T re-encoded does not decode: %v", m, err)
			}
		}
	})
}
