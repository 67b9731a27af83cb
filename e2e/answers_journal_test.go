package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestADispatcherKilledBeforeItsCommitsLandedRePOSTsNothingItsJournalKept
// (the chaos storm's kill -9, docs/reliability.md "The storm row,
// attributed"): a dispatcher's receivers answer 2xx while none of its
// transactions can land (on a loaded cluster a commit takes 0.5-2 s;
// here they are refused, as after a kill -9), then it dies. A new
// process on the same --answers-dir and --group-instance-id fetches the
// same records again, nothing having committed: it must settle them
// from the journaled answers, one POST per delivery in all. Without the
// journal the new process POSTed every one of them again.
func TestADispatcherKilledBeforeItsCommitsLandedRePOSTsNothingItsJournalKept(t *testing.T) {
	st, c := faultyStack(t, func(c *stackConfig) {
		c.kafka.Partitions = 1
		c.dispatcher.GroupInstanceID = "hookline-dispatcher-"
		c.dispatcher.AnswersDir = t.TempDir()
	})
	st.dispatcher.halt() // the test runs its own, which it kills
	rx := &bodyCounter{posts: map[string]int{}}
	srv := httptest.NewServer(rx)
	defer srv.Close()
	for i := range 2 {
		st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: fmt.Sprint(srv.URL, "/hooks/", i)})
	}

	const events = 20
	for i := range events {
		body, _ := json.Marshal(laneEvent{Lane: "x", I: i})
		if _, err := st.events().PublishEvent(st.ctx(), &hooklinev1.PublishEventRequest{EventType: "a.b", Payload: body}); err != nil {
			t.Fatal(err)
		}
	}
	// Every commit of the victim hangs in EndTxn until it is killed, and
	// is then refused: what its receivers answer never commits.
	txn := st.kafka.TopicPrefix + "dispatcher-1"
	killed := make(chan struct{})
	var gone atomic.Bool // the victim ended: its successor commits
	c.ControlKey(int16(kmsg.EndTxn), func(r kmsg.Request) (kmsg.Response, error, bool) {
		if gone.Load() {
			return nil, nil, false // and the control is dropped
		}
		c.KeepControl()
		if !ofTxn(txn)(r) {
			return nil, nil, false
		}
		c.SleepControl(func() { <-killed })
		resp := r.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.InvalidProducerEpoch.Code
		return resp, nil, true
	})
	ctx, kill := context.WithCancel(t.Context())
	victimDone := make(chan struct{})
	victim := st.newDispatcher(time.Second)
	go func() {
		defer close(victimDone)
		_ = victim.Run(ctx) // its commits fail; its end commits nothing either
	}()
	const deliveries = 2 * events
	st.until("every delivery answered 2xx by the victim", func() bool { d, _ := rx.counts(); return d == deliveries })
	kill()
	close(killed)
	<-victimDone
	gone.Store(true)
	if _, total := rx.counts(); total != deliveries {
		t.Fatalf("the victim POSTed %d times for %d deliveries before it died", total, deliveries)
	}

	st.dispatcher.start(st, st.newDispatcher(15*time.Second).Run)
	results := st.terminalResults(deliveries)
	if _, total := rx.counts(); total != deliveries || len(results) != deliveries {
		t.Fatalf("%d POSTs and %d terminal results for %d deliveries after the restart on the victim's answers journal; want one POST each", total, len(results), deliveries)
	}
	for _, r := range results {
		if r.GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED || r.GetStatusCode() != 200 {
			t.Fatalf("a delivery settled from its journaled answer ended %v with status %d; want DELIVERED, 200", r.GetState(), r.GetStatusCode())
		}
	}
}
