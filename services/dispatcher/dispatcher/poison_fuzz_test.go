package dispatcher

import (
	"context"
	"testing"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/sdk/sign"
	"github.com/twmb/franz-go/pkg/kgo"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/protobuf/proto"
)

// FuzzPoisonDelivery feeds arbitrary record values and fault-count
// headers to the dispatcher's front door, as a poison record on the
// deliveries topic would. A record that does not decode is put back
// unchanged and, within MaxFaults passes, set aside on the dead-letter
// topic with its reason: it never panics, never loops for ever, never
// blocks its partition. One that decodes is triaged and, when it does not
// go to a lane, settled without a panic.
func FuzzPoisonDelivery(f *testing.F) {
	good, _ := proto.Marshal(&hooklinev1.Delivery{DeliveryId: "dlv_1", EventId: "evt_1", TenantId: "t", EndpointId: "ep_1", EventType: "a.b", Payload: []byte(`{}`)})
	foreign, _ := proto.Marshal(&hooklinev1.Delivery{DeliveryId: "dlv_2", TenantId: "other", EndpointId: "ep_1"})
	gone, _ := proto.Marshal(&hooklinev1.Delivery{DeliveryId: "dlv_3", TenantId: "t", EndpointId: "ep_gone"})
	f.Add(good, "")
	f.Add(foreign, "")
	f.Add(gone, "2")
	f.Add([]byte{0xff, 0xff}, "")
	f.Add([]byte("not protobuf"), "4")
	f.Add([]byte{0x0a, 0x80}, "-1")
	f.Add([]byte(nil), "9223372036854775807")
	s := newTestService(f, WithTelemetry(tracenoop.NewTracerProvider(), metricnoop.NewMeterProvider()))
	s.store.Put(endpoint("http://127.0.0.1:9/", sign.GenerateSecret()))
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, value []byte, faults string) {
		r := &kgo.Record{Topic: s.topics.Deliveries, Key: []byte("ep_1"), Value: value, Offset: 42}
		if faults != "" {
			r.Headers = []kgo.RecordHeader{{Key: headerFaults, Value: []byte(faults)}}
		}
		d, err := decodeDelivery(r)
		if err != nil {
			// The decode-failure path, pass after pass, as the consumer
			// would see the record come back.
			for pass := 0; ; pass++ {
				out := s.handler.workerFault(ctx, r, err.Error())
				if string(out.Value) != string(value) {
					t.Fatal("a poison record was changed on its way back")
				}
				if out.Topic == s.topics.Dead {
					return
				}
				if out.Topic != s.topics.Deliveries {
					t.Fatalf("a poison record went to %q", out.Topic)
				}
				if pass > s.cfg.MaxFaults {
					t.Fatalf("a poison record with faults header %q came back %d times without being set aside", faults, pass+1)
				}
				r = &kgo.Record{Topic: out.Topic, Key: out.Key, Value: out.Value, Headers: out.Headers}
			}
		}
		now := s.now()
		v, ep := s.handler.triage(d, now, true)
		if v == toLane {
			return
		}
		for _, out := range s.handler.settle(ctx, v, r, d, ep, now) {
			if out.Topic == "" {
				t.Fatalf("verdict %v settled a record with no topic", v)
			}
		}
	})
}

// TestPoisonRecordWithForgedFaultCountIsSetAside is the regression test
// for what FuzzPoisonDelivery found: a worker-fault header of MaxInt
// overflowed to a negative count, and a negative one never reached
// MaxFaults, so a poison record carrying one came back for ever.
func TestPoisonRecordWithForgedFaultCountIsSetAside(t *testing.T) {
	s := newTestService(t, WithTelemetry(tracenoop.NewTracerProvider(), metricnoop.NewMeterProvider()))
	for _, faults := range []string{"9223372036854775807", "-9223372036854775808", "-5", "99999999999999999999999", "x"} {
		r := &kgo.Record{Topic: s.topics.Deliveries, Value: []byte{0xff}, Headers: []kgo.RecordHeader{{Key: headerFaults, Value: []byte(faults)}}}
		for pass := 0; ; pass++ {
			out := s.handler.workerFault(t.Context(), r, "poison")
			if out.Topic == s.topics.Dead {
				break
			}
			if pass >= s.cfg.MaxFaults {
				t.Fatalf("faults header %q: still coming back after %d passes", faults, pass+1)
			}
			r = out
		}
	}
}
