package scheduler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync/atomic"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/config"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/telemetry"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/metric/noop"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// testKafka returns the broker HOOKLINE_TEST_KAFKA names: "kfake" or
// unset for an in-process cluster, otherwise host:port.
func testKafka(t *testing.T) []string {
	t.Helper()
	if addr := os.Getenv("HOOKLINE_TEST_KAFKA"); addr != "" && addr != "kfake" {
		return []string{addr}
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// TestAbortedHopLeavesNoPartitionPausedWithoutATimer: a hop that takes a
// held partition whose head came due, and pauses another for a new hold,
// then aborts (its release cannot be written), must leave no partition
// paused that nothing will resume: every paused partition is held, with
// a timer.
func TestAbortedHopLeavesNoPartitionPausedWithoutATimer(t *testing.T) {
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
	cfg.Tiers = []string{"1m"}
	var offset atomic.Int64 // the test's clock: real time moved forward
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	s, err := New(cfg, WithClock(now))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := s.ensureTopics(ctx); err != nil {
		t.Fatal(err)
	}
	opts, err := cfg.Kafka.Opts()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// A release of the big delivery can never be written: the hop that
	// tries aborts.
	adm := kadm.NewClient(cl)
	altered, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: kadm.StringPtr("1024")}}, s.topics.Deliveries)
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

	tierTopic := s.byTier[time.Minute]
	put := func(partition int32, due time.Time, payload []byte) {
		t.Helper()
		r, err := hkafka.Record(tierTopic, "ep_1", &hooklinev1.Delivery{DeliveryId: "dlv_" + hex.EncodeToString(payload[:4]), EndpointId: "ep_1", Payload: payload, DueAt: timestamppb.New(due)})
		if err != nil {
			t.Fatal(err)
		}
		r.Partition, r.Timestamp = partition, now()
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	pollHop := func() {
		t.Helper()
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		fs := sess.PollFetches(pctx)
		if pctx.Err() != nil {
			t.Fatal("nothing polled")
		}
		if err := s.hop(ctx, sess, fs); err != nil {
			t.Fatal(err)
		}
	}

	// Partition 0's head is due in a minute: held, paused.
	big := make([]byte, 4096) // random: compression cannot shrink it
	_, _ = rand.Read(big)
	put(0, now().Add(time.Minute), big)
	pollHop()
	if len(s.held) != 1 {
		t.Fatalf("held %d partitions, want 1", len(s.held))
	}
	// It comes due (its release is too big to write), and partition 1
	// gets a head due in a minute: one hop takes the first and holds the
	// second, then aborts.
	offset.Add(int64(2 * time.Minute))
	put(1, now().Add(time.Minute), []byte("small payload"))
	pollHop()

	paused := s.cl.PauseFetchPartitions(nil)
	s.mu.Lock()
	defer s.mu.Unlock()
	for topic, parts := range paused {
		for _, p := range parts {
			if h, ok := s.held[tp{topic, p}]; !ok || h.timer == nil {
				t.Errorf("%s/%d paused after an aborted hop with no timer to resume it", topic, p)
			}
		}
	}
}
