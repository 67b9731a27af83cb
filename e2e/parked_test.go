package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/kafkatest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// idCounter counts the requests a receiver got per webhook-id.
type idCounter struct {
	mu  sync.Mutex
	ids map[string]int
}

func (c *idCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.ids[r.Header.Get("webhook-id")]++
	c.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// counts returns how many distinct webhook-ids arrived and how many
// requests in all.
func (c *idCounter) counts() (distinct, total int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.ids {
		total += n
	}
	return len(c.ids), total
}

// parkedStack starts a stack with a receiver and one paused endpoint,
// and publishes n events to it; it returns when all n are parked.
func parkedStack(t *testing.T, n int, configure ...func(*stackConfig)) (*stack, *idCounter, string) {
	t.Helper()
	return parkedOn(t, startStack(t, configure...), n)
}

// parkedOn is parkedStack on st.
func parkedOn(t *testing.T, st *stack, n int) (*stack, *idCounter, string) {
	t.Helper()
	rx := &idCounter{ids: map[string]int{}}
	srv := httptest.NewServer(rx)
	t.Cleanup(srv.Close)
	id := st.createEndpoint(srv.URL + "/hooks").GetEndpoint().GetId()
	if _, err := st.endpoints().PauseEndpoint(st.ctx(), &hooklinev1.PauseEndpointRequest{Id: id, Reason: "maintenance"}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		st.publish("invoice.paid", fmt.Sprintf(`{"n":%d}`, i))
	}
	cl := st.reader(st.topics.Parked)
	defer cl.Close()
	parked := 0
	st.until("every delivery parked", func() bool {
		ctx, cancel := context.WithTimeout(st.ctx(), 100*time.Millisecond)
		defer cancel()
		parked += len(parks(cl.PollFetches(ctx).Records()))
		return parked >= n
	})
	return st, rx, id
}

// heldTopicsEnd is the sum of the end offsets of every topic a hold
// could write: retries, the delay tiers, deliveries and parked.
func heldTopicsEnd(st *stack) int64 {
	sum := st.endOffsets(st.topics.Retries) + st.endOffsets(st.topics.Deliveries) + st.endOffsets(st.topics.Parked)
	for _, d := range []string{"1s", "5s", "30s", "1m", "5m", "30m", "1h"} {
		sum += st.endOffsets(st.topics.DelayPrefix + d)
	}
	return sum
}

// TestParkedHoldCostsO1RecordsAndAResumeDeliversEachOnce: 50 deliveries
// to a paused endpoint held for 10 s write nothing more to the retries,
// delay, deliveries or parked topics while they wait (the recheck path
// wrote ~6 records per delivery per recheck, every 1–5 s); a resume
// delivers all 50 within 5 s, each once.
func TestParkedHoldCostsO1RecordsAndAResumeDeliversEachOnce(t *testing.T) {
	const n = 50
	st, rx, id := parkedStack(t, n)
	before := heldTopicsEnd(st)
	hold := time.NewTimer(10 * time.Second) // the hold under test, not a wait for an outcome
	select {
	case <-hold.C:
	case <-st.failed.Done():
		t.Fatal("a service failed while holding")
	}
	grew := heldTopicsEnd(st) - before
	t.Logf("%d held deliveries for 10 s: the hold topics grew by %d offsets", n, grew)
	if grew > 4 { // a transaction marker or two, not a record per recheck
		t.Fatalf("holding %d deliveries for 10 s grew the retries, delay, deliveries and parked topics by %d offsets; want O(1) per hold, not per recheck", n, grew)
	}
	if d, _ := rx.counts(); d != 0 {
		t.Fatalf("a paused endpoint received %d deliveries", d)
	}
	resumed := time.Now()
	if _, err := st.endpoints().ResumeEndpoint(st.ctx(), &hooklinev1.ResumeEndpointRequest{Id: id}); err != nil {
		t.Fatal(err)
	}
	st.until("every held delivery delivered", func() bool { d, _ := rx.counts(); return d == n })
	if took := time.Since(resumed); took > 5*time.Second {
		t.Errorf("the resume took %v to reach every held delivery, want within 5 s", took)
	}
	results := st.terminalResults(n)
	if d, total := rx.counts(); d != n || total != n {
		t.Fatalf("%d requests for %d deliveries after the resume; want each once", total, d)
	}
	delivered := 0
	for _, r := range results {
		if r.GetState() == hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED {
			delivered++
		}
	}
	if delivered != n {
		t.Fatalf("%d DELIVERED results, want %d", delivered, n)
	}
}

// TestParkedDeliveriesSurviveASchedulerRestartWhileParked: the
// scheduler is replaced while deliveries are parked; its successor reads
// the parked topic from its start, and the resume delivers each once.
func TestParkedDeliveriesSurviveASchedulerRestartWhileParked(t *testing.T) {
	const n = 20
	st, rx, id := parkedStack(t, n)
	st.scheduler.halt()
	st.scheduler.start(st, st.newScheduler().Run)
	if _, err := st.endpoints().ResumeEndpoint(st.ctx(), &hooklinev1.ResumeEndpointRequest{Id: id}); err != nil {
		t.Fatal(err)
	}
	st.until("every held delivery delivered", func() bool { d, _ := rx.counts(); return d == n })
	st.terminalResults(n)
	if d, total := rx.counts(); d != n || total != n {
		t.Fatalf("%d requests for %d deliveries after a scheduler restart and the resume; want each once", total, d)
	}
}

// TestParkedDeliveriesSurviveASchedulerCrashWhileParked: the scheduler
// crashes while deliveries are parked — every transaction of its
// refused from then on, no LeaveGroup — and a new one takes over under
// the same transactional id; the resume delivers each once.
func TestParkedDeliveriesSurviveASchedulerCrashWhileParked(t *testing.T) {
	const n = 20
	st, c := faultyStack(t)
	_, rx, id := parkedOn(t, st, n)
	txn := st.kafka.TopicPrefix + "scheduler-1"
	dead := c.Fault(
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce, kmsg.AddPartitionsToTxn, kmsg.AddOffsetsToTxn, kmsg.TxnOffsetCommit, kmsg.EndTxn}, Err: kerr.InvalidProducerEpoch, Count: -1, TopLevel: true, When: ofTxn(txn)},
		kfake.Fault{Keys: []kmsg.Key{kmsg.LeaveGroup}, Group: st.kafka.TopicPrefix + "scheduler", Err: kerr.UnknownMemberID, Count: 1, TopLevel: true},
	)
	st.scheduler.halt()
	dead.Remove()
	st.scheduler.start(st, st.newScheduler().Run)
	if _, err := st.endpoints().ResumeEndpoint(st.ctx(), &hooklinev1.ResumeEndpointRequest{Id: id}); err != nil {
		t.Fatal(err)
	}
	st.until("every held delivery delivered", func() bool { d, _ := rx.counts(); return d == n })
	st.terminalResults(n)
	if d, total := rx.counts(); d != n || total != n {
		t.Fatalf("%d requests for %d deliveries after a scheduler crash and the resume; want each once", total, d)
	}
}

// TestParkedDeliveriesExpireAtTheMaximumHold: with --max-hold 3 s, the
// scheduler releases each parked delivery at the end of its hold and the
// dispatcher ends it EXPIRED, with a dead letter.
func TestParkedDeliveriesExpireAtTheMaximumHold(t *testing.T) {
	const n = 5
	st, rx, _ := parkedStack(t, n, func(c *stackConfig) { c.dispatcher.MaxHold = 3 * time.Second })
	for _, r := range st.terminalResults(n) {
		if s := r.GetState(); s != hooklinev1.DeliveryState_DELIVERY_STATE_EXPIRED && s != hooklinev1.DeliveryState_DELIVERY_STATE_PARKED {
			t.Fatalf("result %v, want EXPIRED", r)
		}
	}
	dead := kafkatest.Decode(t, st.readN(st.topics.Dead, n), func() *hooklinev1.DeadLetter { return &hooklinev1.DeadLetter{} })
	if len(dead) != n {
		t.Fatalf("%d dead letters, want %d", len(dead), n)
	}
	if d, _ := rx.counts(); d != 0 {
		t.Fatalf("an endpoint paused throughout received %d deliveries", d)
	}
}

// TestParkedDeliveriesOfADeletedEndpointEndAsDeleted: an endpoint
// deleted while its deliveries are parked: the scheduler releases them
// and each ends ENDPOINT_DELETED.
func TestParkedDeliveriesOfADeletedEndpointEndAsDeleted(t *testing.T) {
	const n = 5
	st, rx, id := parkedStack(t, n)
	if _, err := st.endpoints().DeleteEndpoint(st.ctx(), &hooklinev1.DeleteEndpointRequest{Id: id}); err != nil {
		t.Fatal(err)
	}
	cl := st.reader(st.topics.Results)
	defer cl.Close()
	deleted := map[string]bool{}
	st.until("every parked delivery ended ENDPOINT_DELETED", func() bool {
		ctx, cancel := context.WithTimeout(st.ctx(), 100*time.Millisecond)
		fs := cl.PollRecords(ctx, 1000)
		cancel()
		for _, r := range kafkatest.Decode(t, fs.Records(), newResult) {
			if r.GetState() == hooklinev1.DeliveryState_DELIVERY_STATE_ENDPOINT_DELETED {
				deleted[r.GetDeliveryId()] = true
			}
		}
		return len(deleted) == n
	})
	if d, _ := rx.counts(); d != 0 {
		t.Fatalf("a deleted endpoint received %d deliveries", d)
	}
}

// isPark reports whether a record of the parked topic is a park: neither
// one of the scheduler's sync markers (header hookline-sync) nor a
// tombstone.
func isPark(r *kgo.Record) bool {
	return r.Value != nil && !slices.ContainsFunc(r.Headers, func(h kgo.RecordHeader) bool { return h.Key == "hookline-sync" })
}
