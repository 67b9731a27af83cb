package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/kafkatest"
	"github.com/hookline/hookline/services/dispatcher/dispatcher"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/types/known/durationpb"
)

// drainReceiver counts, per delivery (path and webhook-id), the POSTs
// that came after the delivery was answered 2xx: the duplicates. Its
// paths behave as the rolling-upgrade row of the chaos suite mixes them:
// healthy, slow (300 ms), flaky (the first try of one event in three is
// answered 503), and two ordered endpoints (per key, per endpoint).
type drainReceiver struct {
	mu        sync.Mutex
	published map[string]time.Time // webhook-id → when its publish began
	ok        map[string]time.Time // delivery → when it was first answered 2xx
	tries     map[string]int       // delivery → POSTs
	dups      map[string]int       // delivery → POSTs after its 2xx
	healthy   []time.Duration      // publish → first 2xx, healthy paths
	// phase names the step of the test under way; byPhase counts the
	// duplicates POSTed during each.
	phase   string
	byPhase map[string]int
}

func newDrainReceiver() *drainReceiver {
	return &drainReceiver{published: map[string]time.Time{}, ok: map[string]time.Time{}, tries: map[string]int{}, dups: map[string]int{}, byPhase: map[string]int{}, phase: "load"}
}

func (rx *drainReceiver) enter(phase string) {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	rx.phase = phase
}

func (rx *drainReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var ev laneEvent
	_ = json.NewDecoder(r.Body).Decode(&ev)
	id := r.Header.Get("webhook-id")
	d := r.URL.Path + " " + id
	if strings.HasPrefix(r.URL.Path, "/slow") {
		time.Sleep(300 * time.Millisecond) // the receiver's own pace
	}
	now := time.Now()
	rx.mu.Lock()
	defer rx.mu.Unlock()
	rx.tries[d]++
	if strings.HasPrefix(r.URL.Path, "/flaky") && ev.I%3 == 0 && rx.tries[d] == 1 {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if _, done := rx.ok[d]; done {
		rx.dups[d]++
		rx.byPhase[rx.phase]++
	} else {
		rx.ok[d] = now
		if strings.HasPrefix(r.URL.Path, "/healthy") {
			if at, ok := rx.published[id]; ok {
				rx.healthy = append(rx.healthy, now.Sub(at))
			}
		}
	}
	w.WriteHeader(http.StatusOK)
}

// delivered returns how many deliveries were answered 2xx and the
// duplicate POSTs in all.
func (rx *drainReceiver) delivered() (ok, dups int) {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	for _, n := range rx.dups {
		dups += n
	}
	return len(rx.ok), dups
}

// worst returns up to n deliveries with duplicates, and the healthy
// paths' p99 latency.
func (rx *drainReceiver) report(n int) ([]string, time.Duration) {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	var out []string
	for d, k := range rx.dups {
		if len(out) < n {
			out = append(out, fmt.Sprintf("%s ×%d", d, k+1))
		}
	}
	slices.Sort(out)
	lat := slices.Clone(rx.healthy)
	slices.Sort(lat)
	var p99 time.Duration
	if len(lat) > 0 {
		p99 = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	return out, p99
}

// TestARollingUpgradeRePOSTsNothing ([simulation] item 6): two
// dispatchers, static members of their group (--group-instance-id), under
// a steady load over healthy, slow, flaky and ordered endpoints; each in
// turn is stopped gracefully (the call SIGTERM makes: its context ends,
// it drains and commits) and a new one with the same ids started. No
// delivery answered 2xx is POSTed again (docs/DESIGN.md, "What a crash,
// a rebalance or an outage re-POSTs": a graceful drain re-POSTs
// nothing). The healthy endpoints' p99 (publish → first 2xx) is logged.
// With dynamic membership (on main) each restart made the group
// rebalance as the new instance joined, and the members that gave it
// partitions dropped those partitions' attempts in flight and their
// completed, uncommitted outcomes: 1, 26 and 4 duplicates in three runs.
func TestARollingUpgradeRePOSTsNothing(t *testing.T) {
	rollingUpgrade(t, false)
}

// TestAJoiningDispatcherRePOSTsNothing: as TestARollingUpgradeRePOSTsNothing,
// then a third dispatcher joins and the group rebalances: the members
// that give it partitions must re-POST nothing: the revoke of the moved
// partitions waits until their attempts ended and their work committed
// (services/dispatcher/dispatcher/yield.go). Before that hand-off, 6 of
// 6 runs re-POSTed 2 to 139 deliveries (of ~3,060).
func TestAJoiningDispatcherRePOSTsNothing(t *testing.T) {
	rollingUpgrade(t, true)
}

func rollingUpgrade(t *testing.T, join bool) {
	st := startStack(t, func(c *stackConfig) { c.dispatcher.GroupInstanceID = "hookline-dispatcher-" })
	rx := newDrainReceiver()
	srv := httptest.NewServer(rx)
	defer srv.Close()
	paths := []string{"/healthy/0", "/healthy/1", "/healthy/2", "/healthy/3", "/flaky"}
	all := []string{"a.*"}
	for _, p := range paths {
		st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: srv.URL + p, EventTypes: all, RetryPolicy: ladderPolicy(5, time.Second), OutageModeDisabled: true})
	}
	// The slow endpoint gets one event in four, about as many as its cap
	// of 2 over 300 ms lets through: deliveries queue in its lane, so
	// completed deliveries of its partition wait above them.
	st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: srv.URL + "/slow", EventTypes: []string{"a.slow"}, MaxInFlight: 2, OutageModeDisabled: true})
	st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: srv.URL + "/ordered/key", EventTypes: all, Ordering: hooklinev1.Ordering_ORDERING_PER_KEY,
		RetryPolicy: ladderPolicy(5, time.Second), OutageModeDisabled: true})
	st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: srv.URL + "/ordered/endpoint", EventTypes: all, Ordering: hooklinev1.Ordering_ORDERING_PER_ENDPOINT,
		RetryPolicy: ladderPolicy(5, time.Second), OutageModeDisabled: true})
	const endpoints = 7 // every event's, and the slow one's of one event in four

	peers := map[int]*vservice{1: &st.dispatcher, 2: {}, 3: {}}
	defer peers[3].halt()
	defer peers[2].halt()
	deadline := time.Now().Add(waitFor)
	peers[2].start(st, st.newPeer(2, 15*time.Second).Run)
	st.waitSharedBy(2, deadline)

	// The load: one event every 40 ms until stopped, each to every
	// endpoint, over four ordering keys.
	load := startSteadyLoad(st, 40*time.Millisecond, func(i int) error {
		body, _ := json.Marshal(laneEvent{Lane: fmt.Sprint("k", i%4), I: i})
		typ := "a.b"
		if i%4 == 0 {
			typ = "a.slow"
		}
		began := time.Now()
		resp, err := st.events().PublishEvent(st.ctx(), &hooklinev1.PublishEventRequest{EventType: typ, Payload: body, OrderingKey: fmt.Sprint("k", i%4)})
		if err != nil {
			return err
		}
		rx.mu.Lock()
		rx.published[resp.GetEventId()] = began
		rx.mu.Unlock()
		return nil
	})
	more := load.more

	more(100)
	for _, n := range []int{1, 2} {
		t.Logf("dispatcher %d: graceful stop (drain), then a new one", n)
		rx.enter(fmt.Sprint("stop ", n))
		peers[n].halt() // what SIGTERM does: drain, commit, leave
		rx.enter(fmt.Sprint("restart ", n))
		peers[n].start(st, st.newPeer(n, 15*time.Second).Run)
		st.waitSharedBy(2, time.Now().Add(waitFor))
		rx.enter("load")
		more(100)
	}
	if join {
		t.Log("dispatcher 3 joins: the group rebalances")
		rx.enter("join 3")
		peers[3].start(st, st.newPeer(3, 15*time.Second).Run)
		st.waitSharedBy(3, time.Now().Add(waitFor))
		rx.enter("load")
		more(100)
	}
	events := load.end()
	deliveries := events*endpoints + (events+3)/4
	quiet := time.Now()
	st.until(fmt.Sprintf("%d deliveries answered 2xx", deliveries), func() bool {
		ok, dups := rx.delivered()
		if ok < deliveries && time.Now().After(quiet) {
			quiet = time.Now().Add(5 * time.Second)
			t.Logf("%d of %d deliveries answered 2xx, %d duplicates", ok, deliveries, dups)
		}
		return ok == deliveries
	})
	// Every outcome committed: no dispatcher will read any of them again.
	st.terminalResults(deliveries)
	_, dups := rx.delivered()
	some, p99 := rx.report(10)
	rx.mu.Lock()
	byPhase := fmt.Sprint(rx.byPhase)
	rx.mu.Unlock()
	t.Logf("%d events, %d deliveries; duplicates %d (%.1f%%; by step %s); healthy p99 %v", events, deliveries, dups, 100*float64(dups)/float64(deliveries), byPhase, p99)
	if dups != 0 {
		t.Errorf("%d duplicate POSTs of %d deliveries through two graceful restarts (and a join: %v), want 0; e.g. %s", dups, deliveries, join, strings.Join(some, ", "))
	}
}

// TestAGracefulStopRePOSTsNothingCompletedAboveAWaitingDelivery: one
// partition; endpoint S (cap 1) holds its first POST until the test
// lets it go, so S's later deliveries wait in its lane while the
// healthy endpoint H's deliveries, read between and after them, are
// answered. The dispatcher is stopped gracefully with S's deliveries
// still waiting (never attempted); the drain lets S's attempt in flight
// end and commits. The new dispatcher must POST none of H's deliveries
// again: what completed above a delivery that was never attempted is
// committed too (docs/DESIGN.md, "What a crash, a rebalance or an
// outage re-POSTs").
func TestAGracefulStopRePOSTsNothingCompletedAboveAWaitingDelivery(t *testing.T) {
	st := startStack(t, func(c *stackConfig) {
		c.kafka.Partitions = 1
		c.dispatcher.GroupInstanceID = "hookline-dispatcher-"
	})
	rx := newHeldReceiver("/s")
	srv := httptest.NewServer(rx)
	defer srv.Close()
	defer rx.free() // before the server closes: a held request returns
	st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: srv.URL + "/s", MaxInFlight: 1})
	st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: srv.URL + "/h"})
	const events = 6
	for i := range events {
		body, _ := json.Marshal(laneEvent{Lane: "x", I: i})
		if _, err := st.events().PublishEvent(st.ctx(), &hooklinev1.PublishEventRequest{EventType: "a.b", Payload: body}); err != nil {
			t.Fatal(err)
		}
	}
	count := func(path string) (distinct, total int) {
		rx.mu.Lock()
		defer rx.mu.Unlock()
		for k, n := range rx.answered {
			if strings.HasPrefix(k, path+" ") {
				distinct++
				total += n
			}
		}
		return distinct, total
	}
	st.until("every H delivery answered", func() bool { d, _ := count("/h"); return d == events })

	// Stop gracefully, then let S's attempt in flight answer: the drain
	// ends it and commits; S's other deliveries were never attempted.
	v := &st.dispatcher
	v.mu.Lock()
	cancel, done := v.cancel, v.done
	v.mu.Unlock()
	cancel()
	rx.free()
	<-done
	v.start(st, st.newDispatcher(15*time.Second).Run)

	st.until("every S delivery answered", func() bool { d, _ := count("/s"); return d == events })
	st.terminalResults(2 * events)
	_, hTotal := count("/h")
	_, sTotal := count("/s")
	if hTotal != events || sTotal != events {
		t.Fatalf("H got %d POSTs and S %d for %d deliveries each across a graceful stop; want one POST each", hTotal, sTotal, events)
	}
}

// TestACrashRePOSTsNothingCompletedAboveAnAttemptInFlight: one
// partition; endpoint S (cap 1) holds its first POST, so the partition's
// watermark stands at it, while the healthy endpoint H's deliveries read
// after it are answered. Then the dispatcher crashes (its transactions
// refused from then on, as kill -9 leaves them; no drain commits) and a
// new one takes the partition. It must POST none of H's deliveries
// again: what completed above the watermark was committed with the
// watermark, named in the offset commit's metadata (docs/DESIGN.md, "What
// a crash, a rebalance or an outage re-POSTs": at most what was in
// flight plus one commit interval).
func TestACrashRePOSTsNothingCompletedAboveAnAttemptInFlight(t *testing.T) {
	crashAboveAHangingHead(t, "/h", nil, func(st *stack, url string) {
		st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: url + "/h"})
	})
}

// TestACrashRePOSTsNoOrderedMemberDeliveredAboveAnAttemptInFlight
// (issue 23 item 6, issue 24 item 13): as the test above, with the
// deliveries completed above the watermark members of an ordered lane
// that each went outside once (a 503, its retry) and came back to be
// delivered — a settlement that changes the lane. On main such a
// settlement waited for the watermark with its lane change, so a crash
// had the next owner POST every one of them again (in make chaos the
// largest share of the duplicates of every kill row: 23 to 62 ordered
// members); now it commits above the watermark, its lane change with it.
func TestACrashRePOSTsNoOrderedMemberDeliveredAboveAnAttemptInFlight(t *testing.T) {
	var mu sync.Mutex
	tried := map[string]bool{}
	firstTry := func(id string) bool { // each member's first try: outside, then back
		mu.Lock()
		defer mu.Unlock()
		first := !tried[id]
		tried[id] = true
		return first
	}
	crashAboveAHangingHead(t, "/o", firstTry, func(st *stack, url string) {
		st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: url + "/o", Ordering: hooklinev1.Ordering_ORDERING_PER_ENDPOINT,
			RetryPolicy: ladderPolicy(8, time.Second), OutageModeDisabled: true})
	})
}

// crashAboveAHangingHead is the rig of the two tests above: one
// partition; endpoint S (cap 1, the longest timeout) holds its first
// POST, so the partition's watermark stands at it, while endpoint path's
// deliveries (made by create), read after it, are answered 2xx — 503
// first where busy says so. Once each of them was answered 2xx the
// dispatcher crashes (its transactions refused from then on, as kill -9
// leaves them; no drain commits), S's head is let go, and a new
// dispatcher takes the partition: path must get one 2xx-answered POST
// per delivery in all.
func crashAboveAHangingHead(t *testing.T, path string, busy func(webhookID string) bool, create func(st *stack, url string)) {
	t.Helper()
	st, c := faultyStack(t, func(c *stackConfig) { c.kafka.Partitions = 1 })
	st.dispatcher.halt() // the test runs its own, which it crashes
	release := make(chan struct{})
	var mu sync.Mutex
	posts := map[string]int{} // 2xx answers by path and webhook-id
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/s" {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		id := r.Header.Get("webhook-id")
		if r.URL.Path == path && busy != nil && busy(id) {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		mu.Lock()
		posts[r.URL.Path+" "+id]++
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	// S's head hangs past the whole test (its timeout is the longest
	// allowed): the watermark stays at it.
	st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: srv.URL + "/s", MaxInFlight: 1, Timeout: durationpb.New(time.Minute)})
	create(st, srv.URL)
	count := func(path string) (distinct, total int) {
		mu.Lock()
		defer mu.Unlock()
		for k, n := range posts {
			if strings.HasPrefix(k, path+" ") {
				distinct++
				total += n
			}
		}
		return distinct, total
	}

	ctx, crash := context.WithCancel(t.Context())
	victimDone := make(chan struct{})
	victim := st.newDispatcher(time.Second)
	go func() {
		defer close(victimDone)
		_ = victim.Run(ctx) // its commits fail once it has crashed
	}()
	const events = 4
	for i := range events {
		body, _ := json.Marshal(laneEvent{Lane: "x", I: i})
		if _, err := st.events().PublishEvent(st.ctx(), &hooklinev1.PublishEventRequest{EventType: "a.b", Payload: body}); err != nil {
			t.Fatal(err)
		}
	}
	st.until("every "+path+" delivery answered 2xx while S's head is in flight", func() bool { d, _ := count(path); return d == events })
	// Their results are committed within a commit interval or so, before
	// the watermark passes S's head (bounded: on main they never were).
	rd := st.reader(st.topics.Results)
	delivered := 0
	rctx, rcancel := context.WithTimeout(st.failed, 10*time.Second)
	for delivered < events && rctx.Err() == nil {
		for _, res := range kafkatest.Decode(t, rd.PollFetches(rctx).Records(), newResult) {
			if res.GetState() == hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED {
				delivered++
			}
		}
	}
	rcancel()
	rd.Close()
	t.Logf("%d of %s's %d results committed while S's head is in flight", delivered, path, events)

	// The crash: every transaction of the victim refused from now on, no
	// LeaveGroup; then it stops (nothing it does after this commits).
	txn := st.kafka.TopicPrefix + "dispatcher-1"
	dead := c.Fault(
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce, kmsg.AddPartitionsToTxn, kmsg.AddOffsetsToTxn, kmsg.TxnOffsetCommit, kmsg.EndTxn}, Err: kerr.InvalidProducerEpoch, Count: -1, TopLevel: true, When: ofTxn(txn)},
		kfake.Fault{Keys: []kmsg.Key{kmsg.LeaveGroup}, Group: st.kafka.TopicPrefix + "dispatcher", Err: kerr.UnknownMemberID, Count: 1, TopLevel: true},
	)
	crash()
	<-victimDone
	dead.Remove()
	close(release)
	st.dispatcher.start(st, st.newDispatcher(15*time.Second).Run)

	st.until("every S delivery answered", func() bool { d, _ := count("/s"); return d == events })
	st.terminalResults(2 * events)
	if _, total := count(path); total != events {
		t.Fatalf("%s got %d 2xx-answered POSTs for %d deliveries across a crash; want one each: what completed above the watermark was not committed", path, total, events)
	}
}

// TestAGracefulStopCommitsOnceAfterItsAttemptsEnd (the rolling upgrade's
// healthy p99, docs/reliability.md): a stopping dispatcher's partitions
// stand still from SIGTERM until its successor reads them, and each
// commit of its drain is a commit's length of that (0.5-1.2 s on the
// chaos cluster). When the stop comes, a commit interval after the last
// commit, S's first attempt is in flight (answered 300 ms later) and its
// second waits behind it (cap 1; spilled by the drain). The drain used
// to commit the spill at once, and S's answer in a second transaction;
// it commits both in one, once S's attempt has ended.
func TestAGracefulStopCommitsOnceAfterItsAttemptsEnd(t *testing.T) {
	handedOff := make(chan struct{}, 1) // the stopping dispatcher spilled what waits in its lanes
	st, c := faultyStack(t, func(c *stackConfig) {
		c.kafka.Partitions = 1
		c.dispatcher.GroupInstanceID = "hookline-dispatcher-"
		c.dispatcher.CommitInterval = 100 * time.Millisecond
		c.dispatcherOpts = append(c.dispatcherOpts, dispatcher.WithLogger(slog.New(logSignal{
			Handler: testLogger(t, "dispatcher").Handler(), prefix: "stopping: deliveries waiting in lanes deferred", on: func() { notify(handedOff) }})))
	})
	rx := newHeldReceiver("/s")
	srv := httptest.NewServer(rx)
	defer srv.Close()
	defer rx.free() // before the server closes: a held request returns
	st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: srv.URL + "/h"})
	st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: srv.URL + "/s", MaxInFlight: 1})
	txn := st.kafka.TopicPrefix + "dispatcher-1"
	var commits atomic.Int32
	var lastCommit atomic.Int64 // unix nanos of the last EndTxn
	var stopping atomic.Bool
	committed := make(chan struct{}, 1) // the dispatcher ended a transaction after the stop
	c.ControlKey(int16(kmsg.EndTxn), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if req := r.(*kmsg.EndTxnRequest); req.TransactionalID == txn && req.Commit {
			commits.Add(1)
			lastCommit.Store(time.Now().UnixNano())
			if stopping.Load() {
				notify(committed)
			}
		}
		return nil, nil, false
	})
	for range 2 {
		if _, err := st.events().PublishEvent(st.ctx(), &hooklinev1.PublishEventRequest{EventType: "a.b", Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	st.until("H answered twice and committed, S's first attempt in flight, no commit for three intervals", func() bool {
		quiet := lastCommit.Load() != 0 && time.Since(time.Unix(0, lastCommit.Load())) > 300*time.Millisecond
		_, h := rx.counts("/h")
		s, _ := rx.counts("/s")
		return h == 2 && s == 1 && quiet
	})
	before := commits.Load()

	v := &st.dispatcher
	v.mu.Lock()
	cancel, done := v.cancel, v.done
	v.mu.Unlock()
	stopping.Store(true)
	cancel()
	// S's attempt ends only once the drain has spilled S's second
	// delivery, and after a commit of the spill alone if the drain makes
	// one (it must not: then S's answer would need a second): the
	// release waits for the hand-off, then for that commit or 300 ms
	// without it, so a drain that commits early fails here however slow
	// the machine is.
	select {
	case <-handedOff:
	case <-time.After(10 * time.Second):
		t.Fatal("the stopping dispatcher did not hand off in 10 s: the delivery waiting behind S's cap was not spilled")
	}
	select {
	case <-committed:
	case <-time.After(300 * time.Millisecond):
	}
	rx.free()
	<-done
	if n := commits.Load() - before; n != 1 {
		t.Fatalf("the drain committed %d transactions; want 1, once S's attempt in flight had ended", n)
	}
	v.start(st, st.newDispatcher(15*time.Second).Run)
	st.terminalResults(4)
	_, h := rx.counts("/h")
	_, s := rx.counts("/s")
	if h != 2 || s != 2 {
		t.Fatalf("POSTs answered across the stop: H %d, S %d; want two each", h, s)
	}
}

// logSignal passes log records on and calls on, in the logging
// goroutine, when one's message starts with prefix: a test waits for a
// step its service only logs, or acts at that very step (the
// simulation's reactive faults).
type logSignal struct {
	slog.Handler
	prefix string
	on     func()
}

func (h logSignal) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.prefix) {
		h.on()
	}
	return h.Handler.Handle(ctx, r)
}

func (h logSignal) WithAttrs(as []slog.Attr) slog.Handler {
	return logSignal{h.Handler.WithAttrs(as), h.prefix, h.on}
}

func (h logSignal) WithGroup(name string) slog.Handler {
	return logSignal{h.Handler.WithGroup(name), h.prefix, h.on}
}

// notify signals ch without blocking (a buffer of one keeps the first
// signal).
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// heldReceiver answers 200 at once, except on path held, where each
// request waits until free is called (or its client gives up, and it
// goes unanswered). It counts the requests that arrived, by path, and
// those it answered, by path and webhook-id.
type heldReceiver struct {
	held    string
	release chan struct{}
	once    sync.Once

	mu       sync.Mutex
	arrived  map[string]int
	answered map[string]int // "path webhook-id"
}

func newHeldReceiver(held string) *heldReceiver {
	return &heldReceiver{held: held, release: make(chan struct{}), arrived: map[string]int{}, answered: map[string]int{}}
}

func (h *heldReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.arrived[r.URL.Path]++
	h.mu.Unlock()
	if r.URL.Path == h.held {
		select {
		case <-h.release:
		case <-r.Context().Done():
			return
		}
	}
	h.mu.Lock()
	h.answered[r.URL.Path+" "+r.Header.Get("webhook-id")]++
	h.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// free lets the held requests, and every later one, be answered.
func (h *heldReceiver) free() { h.once.Do(func() { close(h.release) }) }

// counts returns how many requests to path arrived and how many were
// answered.
func (h *heldReceiver) counts(path string) (arrived, answered int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, n := range h.answered {
		if strings.HasPrefix(k, path+" ") {
			answered += n
		}
	}
	return h.arrived[path], answered
}
