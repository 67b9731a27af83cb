package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestATransactionADeadDispatcherLeftOpenHoldsItsPartitionsForThreeSessionTimeouts:
// a dispatcher dies in the middle of a commit (its retry and result
// records written, its offsets sent, EndTxn never done) and does not
// come back under its transactional id (scaled down, or replaced under
// a new hostname). Its open transaction holds back every read-committed
// reader of the partitions it wrote, and the committed offsets of the
// deliveries it owned, until the coordinator aborts it at the
// transaction timeout: the delivery it was working on is delivered by
// the surviving dispatcher only then. With Kafka's default of 60 s that
// was a minute of stall after a kill -9 (the simulation's seed 6: 75
// deliveries open 45 s after the faults stopped, behind a transaction
// left open on retries/0 by a crashed dispatcher that stayed down); the
// timeout now defaults to three session timeouts (platform/kafka
// TxnTimeout).
func TestATransactionADeadDispatcherLeftOpenHoldsItsPartitionsForThreeSessionTimeouts(t *testing.T) {
	const session = 6 * time.Second // kfake's minimum
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	st := startStack(t, func(sc *stackConfig) {
		sc.kafka.Brokers = c.ListenAddrs()
		sc.dispatcher.SessionTimeout = session
		sc.scheduler.SessionTimeout = session
	})
	// The first POST of the event is answered 500 (a retry is written in
	// the commit that dies), every later one 200.
	srv := newFailOnceReceiver(t, http.StatusInternalServerError)
	st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: srv.URL, EventTypes: []string{"a.b"}, RetryPolicy: ladderPolicy(5, time.Second), OutageModeDisabled: true})

	// dispatcher-1 dies at its first commit's EndTxn: from then on every
	// transactional request it sends fails as fenced, so it exits and
	// its transaction stays open on the broker.
	txn := st.kafka.TopicPrefix + "dispatcher-1"
	died := make(chan time.Time, 1)
	c.ControlKey(int16(kmsg.EndTxn), func(r kmsg.Request) (kmsg.Response, error, bool) {
		req := r.(*kmsg.EndTxnRequest)
		if req.TransactionalID != txn || !req.Commit {
			c.KeepControl()
			return nil, nil, false
		}
		c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce, kmsg.AddPartitionsToTxn, kmsg.AddOffsetsToTxn, kmsg.TxnOffsetCommit, kmsg.EndTxn, kmsg.InitProducerID},
			Err: kerr.InvalidProducerEpoch, Count: -1, TopLevel: true, When: ofTxn(txn)})
		died <- time.Now()
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.InvalidProducerEpoch.Code
		return resp, nil, true
	})
	st.dispatcher.halt()
	ctx, cancel := context.WithCancel(context.Background())
	d1done := make(chan error, 1)
	d1 := st.newPeer(1, time.Second)
	go func() { d1done <- d1.Run(ctx) }()
	exited := false
	defer func() {
		cancel()
		if exited {
			return
		}
		select {
		case err := <-d1done:
			t.Logf("dispatcher-1 stopped: %v", err)
		case <-time.After(waitFor):
			t.Error("dispatcher-1 did not stop")
		}
	}()

	st.publish("a.b", `{"n":1}`)
	var at time.Time
	select {
	case at = <-died:
	case <-time.After(waitFor):
		t.Fatal("dispatcher-1 never committed its first attempt")
	}
	select {
	case err := <-d1done:
		exited = true
		t.Logf("dispatcher-1 exited: %v", err)
	case <-time.After(waitFor):
		t.Fatal("dispatcher-1 did not exit after it was fenced")
	}
	var peer vservice
	peer.start(st, st.newPeer(2, time.Second).Run)
	defer peer.halt()

	// Three session timeouts for the coordinator to abort the
	// transaction, one for the group, and the retry's second.
	bound := 3*session + session + 5*time.Second
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		var last time.Time
		for _, p := range srv.postsOf() {
			if len(p) > 1 {
				last = p[len(p)-1]
			}
		}
		if !last.IsZero() {
			if took := last.Sub(at); took > bound {
				t.Fatalf("the delivery was POSTed again %v after its dispatcher died; want within %v", took.Round(time.Millisecond), bound)
			} else {
				t.Logf("POSTed again %v after its dispatcher died (bound %v)", took.Round(time.Millisecond), bound)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the delivery was never POSTed again after its dispatcher died")
}
