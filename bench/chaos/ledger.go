package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

func terminal(s hooklinev1.DeliveryState) bool {
	switch s {
	case hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED, hooklinev1.DeliveryState_DELIVERY_STATE_FAILED,
		hooklinev1.DeliveryState_DELIVERY_STATE_EXPIRED, hooklinev1.DeliveryState_DELIVERY_STATE_ENDPOINT_DELETED:
		return true
	}
	return false
}

// results follows the results topic as any Kafka client would
// (read_committed, from the start) and keeps every terminal outcome per
// delivery id. Safe for concurrent use.
type results struct {
	cl   *kgo.Client
	done chan struct{}

	mu    sync.Mutex
	ends  map[string][]hooklinev1.DeliveryState
	last  map[string]lastResult // the latest result of each delivery, terminal or not
	endAt map[string]time.Time  // when the first terminal outcome of each delivery was read
	bad   int                   // records that did not decode
	count int
}

func followResults(brokers []string, topic string) (*results, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		return nil, err
	}
	r := &results{cl: cl, done: make(chan struct{}), ends: map[string][]hooklinev1.DeliveryState{}, last: map[string]lastResult{}, endAt: map[string]time.Time{}}
	go func() {
		defer close(r.done)
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			fs.EachRecord(func(rec *kgo.Record) {
				var ar hooklinev1.AttemptResult
				r.mu.Lock()
				defer r.mu.Unlock()
				r.count++
				if hkafka.Decode(rec, &ar) != nil {
					r.bad++
					return
				}
				r.last[ar.GetDeliveryId()] = lastResult{state: ar.GetState(), attempt: ar.GetAttempt(), status: ar.GetStatusCode(),
					reason: ar.GetReason(), next: ar.GetNextAttemptAt().AsTime(), seen: time.Now(), results: r.last[ar.GetDeliveryId()].results + 1}
				if terminal(ar.GetState()) {
					if _, ok := r.endAt[ar.GetDeliveryId()]; !ok {
						r.endAt[ar.GetDeliveryId()] = time.Now()
					}
					r.ends[ar.GetDeliveryId()] = append(r.ends[ar.GetDeliveryId()], ar.GetState())
				}
			})
		}
	}()
	return r, nil
}

// lastResult is the latest result record of one delivery and how many
// it had: what an unfinished delivery was last seen doing.
type lastResult struct {
	state   hooklinev1.DeliveryState
	attempt uint32
	status  int32
	reason  string
	next    time.Time // next_attempt_at of a RETRY_SCHEDULED result
	seen    time.Time // when the ledger read it
	results int
}

func (r *results) close() {
	r.cl.Close()
	<-r.done
}

// missing returns how many of acc have no terminal outcome yet.
func (r *results) missing(acc []accepted) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, a := range acc {
		if len(r.ends[a.deliveryID]) == 0 {
			n++
		}
	}
	return n
}

// waitSettled polls until every accepted delivery has a terminal outcome
// or the deadline passes.
func (r *results) waitSettled(ctx context.Context, acc []accepted, limit time.Duration) time.Duration {
	start := time.Now()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	deadline := time.After(limit)
	for r.missing(acc) > 0 {
		select {
		case <-ctx.Done():
			return time.Since(start)
		case <-deadline:
			return time.Since(start)
		case <-t.C:
		}
	}
	return time.Since(start)
}

// row is one line of the chaos table.
type row struct {
	Scenario                  string
	Accepted, Delivered, Dead int
	Deleted                   int
	Lost                      int // accepted, no terminal outcome (or DELIVERED but never received)
	MultiTerminal             int // more than one terminal outcome
	Duplicates                int // extra 2xx-answered requests for one webhook-id
	DupIDs                    int // webhook-ids received more than once with 2xx
	Phantom                   int // received, never accepted (nor possibly accepted)
	BodyChanged               int // one webhook-id seen with two bodies
	// OrderViolations: ordered-lane members whose first success came
	// before an earlier member's (orderViolations), over OrderedLanes
	// lanes of OrderedMembers deliveries, OrderedRepeated of them
	// answered 2xx more than once.
	OrderViolations, OrderedLanes, OrderedMembers, OrderedRepeated int
	Unconfirmed                                                    int // publishes never answered OK (not counted as accepted)
	UnconfirmedDelivered                                           int // of those, delivered anyway (allowed: the write landed)
	Rejected                                                       map[string]int
	PushedBack                                                     int           // RESOURCE_EXHAUSTED answers
	PublishP99, HealthyP99                                         time.Duration // 0: nothing measured
	RSS                                                            map[string]float64
	Recover                                                        string
	Settle                                                         time.Duration
	Faults                                                         string
	Err                                                            string
	BadRecords                                                     int
	Examples                                                       []string // a few broken promises, for the log
	// Ledger is one line per accepted delivery (written to ledger.tsv in
	// the scenario's log dir, columns ledgerHeader): its first terminal
	// outcome ("-": none) and when the ledger read it, its receiver kind
	// and lane, what the receiver saw and the delivery's last result
	// record, so a stall or a slow tail can be located.
	Ledger []string
	// Exits are the processes that exited by themselves (the stack's
	// supervisor restarted them): when, which, and the last line logged.
	Exits                []string
	deliveredNotReceived int
}

// reconcile checks the ledger: accepted deliveries against the results
// topic and against what the receivers saw.
func reconcile(rw *row, acc []accepted, unconfirmed map[int64]bool, res *results, rx *receivers, eventSeq map[string]int64) {
	got := rx.snapshot()
	res.mu.Lock()
	defer res.mu.Unlock()
	rw.Accepted = len(acc)
	rw.Unconfirmed = len(unconfirmed)
	rw.BadRecords = res.bad
	known := map[string]bool{}
	acceptedIDs := map[int64]string{} // seq -> event id (of the accepted publish)
	for _, a := range acc {
		known[a.eventID] = true
		acceptedIDs[a.seq] = a.eventID
		ends := res.ends[a.deliveryID]
		s, l := got[a.eventID], res.last[a.deliveryID]
		end := "-"
		if len(ends) > 0 {
			end = ends[0].String()
		}
		rw.Ledger = append(rw.Ledger, fmt.Sprintf("%s\t%s\t%s\t%s\t%d\t%s\t%s\t%d\t%d\t%s\t%s\t%d\t%s\t%d\t%q\t%s\t%s",
			a.deliveryID, end, a.kind, a.lane, a.laneSeq, stamp(a.at), stamp(res.endAt[a.deliveryID]), s.requests, s.ok, stamp(s.firstStart), stamp(s.last),
			l.results, l.state, l.attempt, l.reason, stamp(l.next), stamp(l.seen)))
		if len(ends) == 0 {
			rw.Lost++

			if len(rw.Examples) < 5 {
				rw.Examples = append(rw.Examples, fmt.Sprintf("%s (%s receiver, %d requests) has no terminal outcome", a.deliveryID, a.kind, got[a.eventID].requests))
			}
			continue
		}
		if len(ends) > 1 {
			rw.MultiTerminal++
			if len(rw.Examples) < 5 {
				rw.Examples = append(rw.Examples, fmt.Sprintf("%s (%s receiver, %d 2xx) ended %d times: %v", a.deliveryID, a.kind, got[a.eventID].ok, len(ends), ends))
			}
		}
		switch ends[0] {
		case hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED:
			rw.Delivered++
			if got[a.eventID].ok == 0 {
				rw.deliveredNotReceived++
				rw.Lost++
				if len(rw.Examples) < 5 {
					rw.Examples = append(rw.Examples, fmt.Sprintf("%s (%s receiver) DELIVERED but never answered 2xx", a.deliveryID, a.kind))
				}
			}
		case hooklinev1.DeliveryState_DELIVERY_STATE_ENDPOINT_DELETED:
			rw.Deleted++
		default:
			rw.Dead++
		}
	}
	oc := orderViolations(acc, got)
	rw.OrderedLanes, rw.OrderedMembers, rw.OrderedRepeated, rw.OrderViolations = oc.lanes, oc.members, oc.repeated, oc.violations
	for _, e := range oc.examples {
		if len(rw.Examples) < 10 {
			rw.Examples = append(rw.Examples, e)
		}
	}
	for id, s := range got {
		if s.ok > 1 {
			rw.Duplicates += s.ok - 1
			rw.DupIDs++
		}
		if s.bodyDiff || (known[id] && s.seq != eventSeq[id]) {
			rw.BodyChanged++
		}
		if !known[id] {
			if s.seq >= 0 && unconfirmed[s.seq] {
				rw.UnconfirmedDelivered++
				continue
			}
			rw.Phantom++
			if len(rw.Examples) < 10 {
				rw.Examples = append(rw.Examples, fmt.Sprintf("webhook-id %s (%s receiver, body seq %d, %d requests, %d 2xx) was never accepted; seq %d was accepted as %s",
					id, s.kind, s.seq, s.requests, s.ok, s.seq, acceptedIDs[s.seq]))
			}
		}
	}
}

// dupPerDelivery is duplicates over delivered, as a percentage.
func (r row) dupPerDelivery() string {
	if r.Delivered == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(r.Duplicates)/float64(r.Delivered))
}

// ledgerHeader names the columns of row.Ledger.
const ledgerHeader = "delivery\tterminal\tkind\tlane\tlane_seq\taccepted_at\tterminal_read_at\trequests\tok\tfirst_ok_request\tlast_request\tresults\tlast_state\tlast_attempt\tlast_reason\tnext_attempt_at\tlast_result_read_at"

// stamp formats t for ledger.tsv, "-" for the zero time.
func stamp(t time.Time) string {
	if t.IsZero() || t.Unix() <= 0 {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// healthyP99 is the 99th percentile, over accepted healthy-receiver
// events that arrived, of the time from the accepted publish to the
// receiver's first request.
func healthyP99(acc []accepted, rx *receivers) time.Duration {
	got := rx.snapshot()
	var lat []time.Duration
	for _, a := range acc {
		if s := got[a.eventID]; a.kind == kindHealthy && !s.first.IsZero() {
			lat = append(lat, max(s.first.Sub(a.at), 0))
		}
	}
	return percentile(lat, 0.99)
}

// recovery is how long after the fault healthy deliveries were timely
// again: the publish time (after the fault) of the last healthy event
// that took longer than late to reach its receiver, or never did.
func recovery(acc []accepted, rx *receivers, faultAt time.Time, late time.Duration) string {
	if faultAt.IsZero() {
		return "–"
	}
	got := rx.snapshot()
	var after []accepted
	for _, a := range acc {
		if a.kind == kindHealthy && a.at.After(faultAt) {
			after = append(after, a)
		}
	}
	if len(after) == 0 {
		return "no load after fault"
	}
	sort.Slice(after, func(i, j int) bool { return after[i].at.Before(after[j].at) })
	var worst time.Duration
	for _, a := range after {
		s := got[a.eventID]
		if s.first.IsZero() || s.first.Sub(a.at) > late {
			worst = a.at.Sub(faultAt)
		}
	}
	if worst == 0 {
		return "0 s (no healthy delivery late)"
	}
	return fmt.Sprintf("%.1f s", worst.Seconds())
}
