package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAbortedCommitsRePOSTNothingCompleted (issue 24 items 8 and 13): the
// dispatcher's transactions abort for N rounds in a row the way a
// rebalance aborts them (the offset commit answered
// REBALANCE_IN_PROGRESS), while it owns every partition all along. No
// delivery already attempted is POSTed again: the completed work of the
// partitions it keeps is committed after the aborts, not redone.
func TestAbortedCommitsRePOSTNothingCompleted(t *testing.T) {
	abortedCommitsRePOSTNothing(t, "aborted commits", 6, rebalanceAbort)
}

// TestACommitAbortedByAFailedProduceRePOSTsNothingCompleted (issue 23
// item 6, issue 24 item 13): the dispatcher's produces to the results
// topic fail N times in a row with an error kgo does not retry and that
// blames no record (CORRUPT_MESSAGE: what a broker dying mid-request
// looks like to the transaction — in make chaos's kill-broker row every
// record of the commit failed with "broker closed the connection"). The
// commit aborts each time; what the window completed is committed after
// the aborts, never POSTed again. On main every such abort dropped the
// whole window, and everything it had completed was POSTed again.
func TestACommitAbortedByAFailedProduceRePOSTsNothingCompleted(t *testing.T) {
	abortedCommitsRePOSTNothing(t, "commits aborted by failed produces", 4, func(st *stack) kfake.Fault {
		return kfake.Fault{
			Keys:  []kmsg.Key{kmsg.Produce},
			Topic: st.kafka.TopicPrefix + "results",
			Err:   kerr.CorruptMessage,
			When: func(r kmsg.Request) bool {
				req, ok := r.(*kmsg.ProduceRequest)
				return ok && req.TransactionID != nil
			},
		}
	})
}

// TestACommitAbortedWhileTheWindowIsFullIsCommittedAfter (issue 23, make
// sim seeds 9 and 24): a window of 6 deliveries, full of completed work
// when its commit aborts. The session rewound every partition to its
// committed offset, and a full window polls nothing, so franz-go leaves
// those partitions out of the next offset commit (it sends only
// partitions polled past their commit). The commit that keeps the
// aborted one's work must still name their offsets: before, it aborted
// for the missing partitions every time, for ever, and nothing more was
// delivered.
func TestACommitAbortedWhileTheWindowIsFullIsCommittedAfter(t *testing.T) {
	abortedCommitsRePOSTNothing(t, "aborted commits of a full window", 2, rebalanceAbort, func(c *stackConfig) { c.dispatcher.WindowRecords = 6 })
}

// rebalanceAbort answers the dispatcher's offset commits
// REBALANCE_IN_PROGRESS, as a rebalance does: its transactions abort.
func rebalanceAbort(st *stack) kfake.Fault {
	group := st.kafka.TopicPrefix + "dispatcher"
	return kfake.Fault{
		Keys: []kmsg.Key{kmsg.TxnOffsetCommit},
		Err:  kerr.RebalanceInProgress,
		When: func(r kmsg.Request) bool {
			req, ok := r.(*kmsg.TxnOffsetCommitRequest)
			return ok && req.Group == group
		},
	}
}

// abortedCommitsRePOSTNothing publishes 40 events to 3 endpoints while
// fault (Count set to rounds) aborts the dispatcher's commits rounds
// times, and requires one POST and one terminal result per delivery.
func abortedCommitsRePOSTNothing(t *testing.T, what string, rounds int, fault func(st *stack) kfake.Fault, configure ...func(*stackConfig)) {
	t.Helper()
	st, c := faultyStack(t, configure...)
	bodies := &bodyCounter{posts: map[string]int{}}
	srv := httptest.NewServer(bodies)
	defer srv.Close()
	for i := range 3 {
		st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: fmt.Sprint(srv.URL, "/hooks/", i)})
	}
	f := fault(st)
	f.Count = rounds
	aborts := c.Fault(f)
	const events = 40
	for i := range events {
		body, _ := json.Marshal(laneEvent{"x", i})
		if _, err := st.events().PublishEvent(st.ctx(), &hooklinev1.PublishEventRequest{EventType: "a.b", Payload: body}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(st.failed, waitFor)
	defer cancel()
	if err := aborts.Wait(ctx, rounds); err != nil {
		t.Fatalf("the dispatcher's commits did not abort %d times (%s): %v", rounds, what, err)
	}
	const deliveries = 3 * events
	st.until("every delivery POSTed", func() bool { d, _ := bodies.counts(); return d == deliveries })
	results := st.terminalResults(deliveries)
	if _, total := bodies.counts(); total != deliveries || len(results) != deliveries {
		t.Fatalf("%d POSTs and %d results for %d deliveries after %d %s; want one POST each", total, len(results), deliveries, rounds, what)
	}
}
