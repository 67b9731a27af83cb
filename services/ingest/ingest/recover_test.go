package ingest

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/sdk/ids"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// recoverRig is a history rig with one endpoint of acme's and n failed
// deliveries to it, each of its own event with a payload of size bytes.
func recoverRig(t *testing.T, n, size int, configure func(*Config)) (*historyRig, string, time.Time) {
	t.Helper()
	r := newHistoryRig(t)
	r.configure = configure
	r.start()
	ep, err := hooklinev1.NewEndpointServiceClient(r.conn).CreateEndpoint(r.ctx(), &hooklinev1.CreateEndpointRequest{Url: "https://93.184.216.34/hooks"})
	if err != nil {
		t.Fatal(err)
	}
	id := ep.GetEndpoint().GetId()
	opts, err := r.kafka.Opts()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(opts, kgo.ProducerBatchMaxBytes(hkafka.MaxRecordBytes))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	since := time.Now().Add(-time.Minute)
	for i := range n {
		at := since.Add(time.Duration(i) * time.Millisecond)
		payload := append(append([]byte(`{"pad":"`), bytes.Repeat([]byte{'a' + byte(i%26)}, size)...), `"}`...)
		d := &hooklinev1.Delivery{DeliveryId: ids.New(ids.Delivery, at), EventId: ids.New(ids.Event, at), TenantId: "acme", EndpointId: id,
			EventType: "a.b", Payload: payload, Attempt: 1, CreatedAt: timestamppb.New(at)}
		res := &hooklinev1.AttemptResult{DeliveryId: d.GetDeliveryId(), EventId: d.GetEventId(), TenantId: "acme", EndpointId: id, EventType: "a.b",
			Attempt: 1, State: hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, StatusCode: 410, StartedAt: timestamppb.New(at.Add(time.Second))}
		for topic, m := range map[string]proto.Message{r.topics.Deliveries: d, r.topics.Results: res} {
			rec, err := hkafka.Record(topic, id, m)
			if err != nil {
				t.Fatal(err)
			}
			if err := cl.ProduceSync(t.Context(), rec).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return r, id, since
}

// TestARefusedRecoverReadsNoPayloads: a RecoverEndpoint over more failed
// deliveries than --recover-max-deliveries is refused having counted
// them, without reading their payloads. On main it loaded every payload
// of the window (and each record's attempts) before the limit check:
// four refused calls took ingest to 1.44 GB.
func TestARefusedRecoverReadsNoPayloads(t *testing.T) {
	const n, size, calls = 48, 256 << 10, 4 // 12 MiB of payloads
	r, ep, since := recoverRig(t, n, size, func(c *Config) { c.RecoverMaxDeliveries = 8 })
	api := hooklinev1.NewDeliveryServiceClient(r.conn)
	refused := func() {
		stream, err := api.RecoverEndpoint(r.ctx(), &hooklinev1.RecoverEndpointRequest{EndpointId: ep, Since: timestamppb.New(since)})
		if err == nil {
			_, err = stream.Recv()
		}
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--recover-max-deliveries") {
			t.Fatalf("recover %d failed deliveries with a limit of 8: %v, want ResourceExhausted naming --recover-max-deliveries", n, err)
		}
	}
	refused() // the index is synced, the connection warm
	before := deliveriesEnd(r)
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for range calls {
		refused()
	}
	runtime.ReadMemStats(&m1)
	allocated := m1.TotalAlloc - m0.TotalAlloc
	t.Logf("%d refused recovers of %d deliveries of %d KiB allocated %.1f MiB in the process", calls, n, size>>10, float64(allocated)/(1<<20))
	// Reading the payloads costs at least 12 MiB a call (48 MiB for the
	// four; 50 MiB measured on main). Counting ids costs a fraction of
	// one call's payloads across all four (0.2 MiB measured; 1.8 MiB
	// under -race, whose goroutines allocate meanwhile).
	if limit := uint64(n * size); allocated > limit {
		t.Fatalf("%d refused recovers allocated %d bytes, more than one window's payloads (%d): they read the payloads", calls, allocated, limit)
	}
	if got, was := deliveriesEnd(r), before; got != was {
		t.Fatalf("refused recovers wrote %d deliveries", got-was)
	}
}

// deliveriesEnd is the sum of the deliveries topic's end offsets.
func deliveriesEnd(r *historyRig) int64 {
	var n int64
	r.endOffsets().Each(func(o kadm.ListedOffset) {
		if o.Topic == r.topics.Deliveries {
			n += o.Offset
		}
	})
	return n
}

// TestARecoverWithinTheLimitWritesItsWindowInBatches: a recover whose
// deliveries hold more bytes than --max-in-flight-bytes writes every one
// of them, a batch at a time through admission, and reports them all.
func TestARecoverWithinTheLimitWritesItsWindowInBatches(t *testing.T) {
	const n, size = 24, 256 << 10 // 6 MiB: two batches
	r, ep, since := recoverRig(t, n, size, func(c *Config) { c.MaxInFlightBytes = 1 << 20 })
	before := deliveriesEnd(r)
	ctx, cancel := context.WithCancel(r.ctx())
	defer cancel()
	stream, err := hooklinev1.NewDeliveryServiceClient(r.conn).RecoverEndpoint(ctx, &hooklinev1.RecoverEndpointRequest{EndpointId: ep, Since: timestamppb.New(since)})
	if err != nil {
		t.Fatal(err)
	}
	p, err := stream.Recv()
	if err != nil || p.GetTotal() != n || p.GetUnavailable() != 0 {
		t.Fatalf("first progress %v, %v; want %d deliveries", p, err, n)
	}
	if got := deliveriesEnd(r) - before; got != n {
		t.Fatalf("recover wrote %d deliveries, want %d", got, n)
	}
}
