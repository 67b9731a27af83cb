package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/kafkatest"
	"github.com/hookline/hookline/services/dispatcher/dispatcher"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
)

// TestClockSkewBetweenSchedulerAndDispatcherNeitherLoopsNorFiresEarly
// runs the scheduler on the wall clock and the dispatcher on a clock
// offset from it (I6, docs/DESIGN.md: the clock-skew tolerance is the
// dispatcher's --early-hold, 2 s by default). Each delivery fails once
// (503) and is retried after its rung; the retry is due by the
// dispatcher's clock, which wrote it, so a scheduler ahead releases it
// early by the dispatcher's clock.
//
//   - Within the tolerance the dispatcher keeps the early retry in
//     memory until it is due: a delivery's records on the deliveries and
//     retries topics are its publish, its retry and the retry's release.
//   - Beyond it the retry goes round again once, due when the
//     scheduler's clock says the dispatcher's has reached its due time:
//     two records more.
//   - A scheduler behind releases late by the dispatcher's clock, never
//     early.
//
// In every case the second attempt starts (by the dispatcher's clock,
// which stamps started_at) no earlier than the due time the first
// attempt's result gave it.
func TestClockSkewBetweenSchedulerAndDispatcherNeitherLoopsNorFiresEarly(t *testing.T) {
	for _, tc := range []struct {
		name string
		// skew is the dispatcher's clock minus the scheduler's.
		skew    time.Duration
		rung    time.Duration
		maxHops int // records on deliveries+retries per delivery
	}{
		{"dispatcher 1s behind, within the tolerance", -time.Second, 2 * time.Second, 3},
		{"dispatcher 3s behind, beyond the tolerance", -3 * time.Second, 4 * time.Second, 5},
		{"dispatcher 2s ahead", 2 * time.Second, 2 * time.Second, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := func() time.Time { return time.Now().Add(tc.skew).Round(0) }
			st := startStack(t, func(c *stackConfig) {
				c.dispatcherOpts = append(c.dispatcherOpts, dispatcher.WithClock(clock))
				// Every delivery fails once: no outage mode, so none is
				// held.
				c.dispatcher.OutageAfter = 0
			})
			rx := newFailOnceReceiver(t, http.StatusServiceUnavailable)
			st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, RetryPolicy: ladderPolicy(3, tc.rung)})
			const n = 3
			for i := range n {
				st.publish("invoice.paid", fmt.Sprintf(`{"n":%d}`, i))
			}

			results := kafkatest.Decode(t, st.readN(st.topics.Results, 2*n), func() *hooklinev1.AttemptResult { return &hooklinev1.AttemptResult{} })
			due := map[string]time.Time{}
			started := map[string]time.Time{}
			for _, r := range results {
				switch {
				case r.GetAttempt() == 1 && r.GetState() == hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED:
					due[r.GetDeliveryId()] = r.GetNextAttemptAt().AsTime()
				case r.GetAttempt() == 2 && r.GetState() == hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED:
					started[r.GetDeliveryId()] = r.GetStartedAt().AsTime()
				default:
					t.Fatalf("unexpected result: attempt %d %v (%s)", r.GetAttempt(), r.GetState(), r.GetReason())
				}
			}
			if len(due) != n || len(started) != n {
				t.Fatalf("%d retries scheduled and %d delivered, want %d each", len(due), len(started), n)
			}
			for id, at := range started {
				if at.Before(due[id]) {
					t.Errorf("delivery %s: attempt 2 started %v before its due time by the dispatcher's clock", id, due[id].Sub(at))
				}
			}

			hops := st.recordsPerDelivery(st.topics.Deliveries, st.topics.Retries)
			if len(hops) != n {
				t.Fatalf("records of %d deliveries on the deliveries and retries topics, want %d", len(hops), n)
			}
			for id, h := range hops {
				if h > tc.maxHops {
					t.Errorf("delivery %s: %d records on the deliveries and retries topics, want at most %d (a hop loop between scheduler and dispatcher)", id, h, tc.maxHops)
				}
			}
		})
	}
}

// recordsPerDelivery reads topics from their start to their current end
// (committed records; transaction markers are read to know the end is
// reached) and counts each delivery's records on them.
func (st *stack) recordsPerDelivery(topics ...string) map[string]int {
	st.t.Helper()
	ends, err := st.admin.ListEndOffsets(st.t.Context(), topics...)
	if err != nil {
		st.t.Fatal(err)
	}
	left := map[string]map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			if left[o.Topic] == nil {
				left[o.Topic] = map[int32]int64{}
			}
			left[o.Topic][o.Partition] = o.Offset
		}
	})
	opts, _ := st.kafka.Opts()
	cl, err := kgo.NewClient(append(opts,
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		st.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(st.failed, waitFor)
	defer cancel()
	out := map[string]int{}
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			st.t.Fatalf("reading %v to its end: %v short", topics, left)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if ps := left[r.Topic]; ps != nil && r.Offset+1 >= ps[r.Partition] {
				delete(ps, r.Partition)
				if len(ps) == 0 {
					delete(left, r.Topic)
				}
			}
			if r.Attrs.IsControl() {
				return
			}
			var d hooklinev1.Delivery
			if err := proto.Unmarshal(r.Value, &d); err != nil {
				st.t.Fatalf("%s: %v", r.Topic, err)
			}
			out[d.GetDeliveryId()]++
		})
	}
	return out
}
