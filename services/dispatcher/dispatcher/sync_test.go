package dispatcher

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/kafkatest"
	"github.com/hookline/hookline/sdk/sign"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAFailingEndpointsSyncIsRetriedNotAWorkerFault: a delivery names an
// endpoint the dispatcher's view does not know yet, and the sync that
// would tell "not read yet" from "deleted" fails (the broker answers
// its ListOffsets with an error) twice. The sync is retried with backoff
// until it succeeds — an infrastructure error, never a worker fault:
// the record is not put back with a fault count, not set aside, and no
// attempt is spent; once the view has the endpoint the delivery is
// delivered, at attempt 1.
func TestAFailingEndpointsSyncIsRetriedNotAWorkerFault(t *testing.T) {
	var requests atomic.Int32
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { requests.Add(1) }))
	defer rx.Close()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := newTestService(t)
	kc := hkafka.Config{Brokers: c.ListenAddrs(), ClientID: "test", TopicPrefix: "t.", Partitions: 1, ReplicationFactor: 1}
	opts, err := kc.Opts()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := kc.EnsureTopics(t.Context(), kadm.NewClient(cl), kc.Specs()[:1]); err != nil {
		t.Fatal(err)
	}
	topic := kc.Topics().Endpoints
	stop, _, err := s.store.Start(t.Context(), kc)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	// From now on the broker refuses the next four ListOffsets of the
	// endpoints topic (two syncs: each tries a fast path and kadm's);
	// the first refusal lets the endpoint be written.
	const refusals = 4
	var mu sync.Mutex
	refused := 0
	failing := make(chan struct{})
	c.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		lo := req.(*kmsg.ListOffsetsRequest)
		if len(lo.Topics) != 1 || lo.Topics[0].Topic != topic || lo.Topics[0].Partitions[0].Timestamp != -1 {
			return nil, nil, false // not a sync: the consumer's own look-ups (of the start)
		}
		mu.Lock()
		defer mu.Unlock()
		if refused == refusals {
			return nil, nil, false
		}
		refused++
		if refused == 1 {
			close(failing)
		}
		resp := lo.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, rt := range lo.Topics {
			st := kmsg.NewListOffsetsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewListOffsetsResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.UnknownServerError.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})

	r := deliveryRecord(t, s) // for ep_1, which the view does not know
	out := make(chan []*kgo.Record, 1)
	go func() { out <- s.handler.handleSafely(context.WithoutCancel(t.Context()), r) }()
	<-failing
	ep, err := hkafka.Record(topic, "ep_1", endpoint(rx.URL, sign.GenerateSecret()))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(t.Context(), ep).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var outs []*kgo.Record
	select {
	case outs = <-out:
	case <-time.After(30 * time.Second):
		t.Fatal("the delivery was not handled within 30 s of the endpoint being written")
	}

	mu.Lock()
	n := refused
	mu.Unlock()
	if n != refusals {
		t.Fatalf("the broker refused %d ListOffsets, want %d: the sync was not retried", n, refusals)
	}
	for _, o := range outs {
		if o.Topic == s.topics.Deliveries || o.Topic == s.topics.Dead {
			t.Fatalf("a failing sync put the delivery back or set it aside (%s): counted as a worker fault", o.Topic)
		}
		for _, h := range o.Headers {
			if h.Key == headerFaults {
				t.Fatal("a failing sync counted a worker fault")
			}
		}
	}
	res := kafkatest.DecodeTopic(t, outs, s.topics.Results, newResult)
	if len(res) != 1 || res[0].GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED || requests.Load() != 1 {
		t.Fatalf("results %v, %d requests; want one DELIVERED after the sync succeeded", res, requests.Load())
	}
}
