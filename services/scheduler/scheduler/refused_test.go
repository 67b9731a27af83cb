package scheduler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/config"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/telemetry"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/metric/noop"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestARefusedReleaseIsSetAsideAndTheHopsBackOff (issue 24 item 6): one
// due release the deliveries topic refuses (over its max.message.bytes)
// must not abort every hop in a tight loop behind it: the hop that
// aborts backs off, the refused delivery is blamed and, when it comes
// again, set aside with a FAILED result and a dead letter (without its
// payload), and the other due release in the same poll is released.
func TestARefusedReleaseIsSetAsideAndTheHopsBackOff(t *testing.T) {
	cfg, err := config.Defaults[Config]()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	cfg.Kafka.Brokers = testKafka(t)
	cfg.Kafka.TopicPrefix = "sch" + hex.EncodeToString(b) + "."
	cfg.Kafka.Partitions = 2
	cfg.Group = cfg.Kafka.TopicPrefix + "scheduler"
	cfg.TransactionalID = cfg.Kafka.TopicPrefix + "scheduler-1"
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	s.backoff = func(_ context.Context, d time.Duration) { waits = append(waits, d) }
	ctx := t.Context()
	if err := s.ensureTopics(ctx); err != nil {
		t.Fatal(err)
	}
	opts, err := cfg.Kafka.Opts()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// Under the big release, over the small one: a batch holding both
	// is refused, and the big one is blamed (hkafka.BigRecord).
	altered, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: kadm.StringPtr("65536")}}, s.topics.Deliveries)
	if err == nil {
		_, err = altered.On(s.topics.Deliveries, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	lag, err := telemetry.NewLag(noop.NewMeterProvider(), cfg.Group)
	if err != nil {
		t.Fatal(err)
	}
	defer lag.Close()
	sess, err := s.newSession(opts, lag, &hkafka.Membership{})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	s.cl = sess.Client()

	put := func(partition int32, id string, payload []byte) {
		t.Helper()
		r, err := hkafka.Record(s.topics.Retries, "ep_1", &hooklinev1.Delivery{DeliveryId: id, EventId: "evt_" + id, TenantId: "t", EndpointId: "ep_1",
			Attempt: 2, Payload: payload, DueAt: timestamppb.New(time.Now().Add(-time.Second))})
		if err != nil {
			t.Fatal(err)
		}
		r.Partition = partition
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	big := make([]byte, 2*hkafka.BigRecord)
	_, _ = rand.Read(big)
	put(0, "dlv_big", big)
	put(1, "dlv_small", []byte(`{}`))

	hops := 0
	for ; hops < 20 && !released(t, cfg.Kafka, s.topics.Deliveries, "dlv_small"); hops++ {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		fs := sess.PollFetches(pctx)
		cancel()
		if err := s.hop(ctx, sess, fs); err != nil {
			t.Fatal(err)
		}
	}
	if hops > 3 || len(waits) > 1 {
		t.Fatalf("%d hops (%d aborted, backoffs %v) before the small release was written; want at most 3, one abort backing off", hops, len(waits), waits)
	}
	if len(waits) == 1 && waits[0] < hkafka.AbortBackoffMin {
		t.Fatalf("aborted hop backed off %v, want at least %v", waits[0], hkafka.AbortBackoffMin)
	}
	var res []*hooklinev1.AttemptResult
	for _, r := range readAll(t, cfg.Kafka, s.topics.Results) {
		var ar hooklinev1.AttemptResult
		if hkafka.Decode(r, &ar) == nil {
			res = append(res, &ar)
		}
	}
	var dead []*hooklinev1.DeadLetter
	for _, r := range readAll(t, cfg.Kafka, s.topics.Dead) {
		var dl hooklinev1.DeadLetter
		if hkafka.Decode(r, &dl) == nil {
			dead = append(dead, &dl)
		}
	}
	if len(res) != 1 || res[0].GetDeliveryId() != "dlv_big" || res[0].GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_FAILED || res[0].GetReason() == "" {
		t.Fatalf("results %v; want dlv_big FAILED with a reason", res)
	}
	if len(dead) != 1 || dead[0].GetDelivery().GetDeliveryId() != "dlv_big" || len(dead[0].GetDelivery().GetPayload()) != 0 {
		t.Fatalf("dead letters %v; want dlv_big without its payload", dead)
	}
}

// readAll returns topic's committed records so far.
func readAll(t *testing.T, cfg hkafka.Config, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	recs, err := hkafka.ReadAll(ctx, cfg, topic)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// released reports whether a delivery of id was written to topic.
func released(t *testing.T, cfg hkafka.Config, topic, id string) bool {
	t.Helper()
	for _, r := range readAll(t, cfg, topic) {
		var d hooklinev1.Delivery
		if hkafka.Decode(r, &d) == nil && d.GetDeliveryId() == id {
			return true
		}
	}
	return false
}
