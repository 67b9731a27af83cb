package scheduler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/config"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestEndTxnTimeoutIsRetriedInProcess: the transaction coordinator
// answers the first EndTxn requests with REQUEST_TIMED_OUT (the outcome
// of a commit is then unknown to the client). The scheduler must not
// exit: it resolves the transaction, consumes the hop's work again after
// a backoff, and releases each due delivery exactly once.
func TestEndTxnTimeoutIsRetriedInProcess(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const failures = 3
	var mu sync.Mutex
	failed := 0
	c.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		if failed == failures {
			return nil, nil, false
		}
		failed++
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.RequestTimedOut.Code
		return resp, nil, true
	})

	cfg, err := config.Defaults[Config]()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	cfg.Kafka.Brokers = c.ListenAddrs()
	cfg.Kafka.TopicPrefix = "sch" + hex.EncodeToString(b) + "."
	cfg.Kafka.Partitions = 1 // one deliveries partition: the marker's release orders after every earlier one
	cfg.Group = cfg.Kafka.TopicPrefix + "scheduler"
	cfg.TransactionalID = cfg.Kafka.TopicPrefix + "scheduler-1"
	cfg.Tiers = []string{"1m"}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx) }()

	opts, err := cfg.Kafka.Opts()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(opts,
		kgo.ConsumeTopics(s.topics.Deliveries),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	put := func(id string) {
		t.Helper()
		r, err := hkafka.Record(s.byTier[time.Minute], "ep_1", &hooklinev1.Delivery{DeliveryId: id, EndpointId: "ep_1", Payload: []byte(id), DueAt: timestamppb.New(time.Now().Add(-time.Second))})
		if err != nil {
			t.Fatal(err)
		}
		for {
			err := cl.ProduceSync(ctx, r).FirstErr()
			if err == nil {
				return
			}
			if !kerr.IsRetriable(err) { // the topic not there yet is retriable
				t.Fatal(err)
			}
			select { // the scheduler creates its topics as it starts
			case err := <-ran:
				t.Fatalf("scheduler ended: %v", err)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	put("dlv_first")

	// Wait until every injected failure was answered, then put a marker:
	// when its release is read, everything released before it was too.
	seen := map[string]int{}
	markerPut := false
	for seen["dlv_marker"] == 0 {
		mu.Lock()
		done := failed == failures
		mu.Unlock()
		if done && !markerPut {
			put("dlv_marker")
			markerPut = true
		}
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := cl.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) {
			var d hooklinev1.Delivery
			if err := hkafka.Decode(r, &d); err != nil {
				t.Fatal(err)
			}
			seen[d.GetDeliveryId()]++
		})
		select {
		case err := <-ran:
			t.Fatalf("scheduler ended after a failed EndTxn: %v", err)
		default:
		}
	}
	if seen["dlv_first"] != 1 || seen["dlv_marker"] != 1 {
		t.Fatalf("releases %v, want each delivery released exactly once", seen)
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatalf("scheduler ended with %v", err)
	}
}
