package dispatcher

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/sdk/sign"
	"github.com/hookline/hookline/services/dispatcher/health"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
)

// orderedReceiver answers each delivery by a plan fixed in advance (a
// few transient failures, some with Retry-After, then a success or a
// permanent failure) and checks, at every request, that every delivery
// published before it in its lane has had its terminal answer.
type orderedReceiver struct {
	t        *testing.T
	mu       sync.Mutex
	plans    map[string][]int // by lane+index: status codes, in order
	tries    map[string]int
	ended    map[string]map[int]bool // lane → index → terminal answer given
	busy     map[string]bool
	sequence map[string][]int // lane → indexes in the order first delivered
	bad      []string
}

type orderedBody struct {
	Lane string `json:"lane"`
	I    int    `json:"i"`
}

func (rx *orderedReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var b orderedBody
	if err := json.Unmarshal(raw, &b); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	id := fmt.Sprint(b.Lane, "/", b.I)
	rx.mu.Lock()
	if rx.busy[b.Lane] {
		rx.bad = append(rx.bad, fmt.Sprintf("%s: two attempts of lane %s at once", id, b.Lane))
	}
	for j := range b.I {
		if _, planned := rx.plans[fmt.Sprint(b.Lane, "/", j)]; planned && !rx.ended[b.Lane][j] {
			rx.bad = append(rx.bad, fmt.Sprintf("%s attempted before %s/%d ended", id, b.Lane, j))
		}
	}
	rx.busy[b.Lane] = true
	plan := rx.plans[id]
	n := rx.tries[id]
	rx.tries[id] = n + 1
	code := plan[min(n, len(plan)-1)]
	if code == http.StatusOK || code == http.StatusBadRequest {
		if rx.ended[b.Lane][b.I] && code == http.StatusOK {
			rx.bad = append(rx.bad, id+" delivered twice")
		}
		rx.ended[b.Lane][b.I] = true
		if code == http.StatusOK {
			rx.sequence[b.Lane] = append(rx.sequence[b.Lane], b.I)
		}
	}
	rx.busy[b.Lane] = false
	rx.mu.Unlock()
	if code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "7")
	}
	w.WriteHeader(code)
}

// TestOrderedLanesDeliverInPublishOrderWhateverFails is the property
// test of ordered delivery in one dispatcher: random transient failures
// (some with Retry-After), permanent failures (skipped: dead-lettered)
// and outage-mode holds, with the retry path simulated (every record the
// dispatcher sends round again comes back at a later offset once due,
// virtual time) and stuck-partition spills. Each receiver lane sees its
// deliveries in publish order, each attempt only after every earlier
// member of its lane ended, and every delivery ends exactly once.
func TestOrderedLanesDeliverInPublishOrderWhateverFails(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { orderedProperty(t, seed) })
	}
}

func orderedProperty(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	rx := &orderedReceiver{t: t, plans: map[string][]int{}, tries: map[string]int{}, ended: map[string]map[int]bool{},
		busy: map[string]bool{}, sequence: map[string][]int{}}
	srv := httptest.NewServer(rx)
	defer srv.Close()
	clock := newFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newTestService(t, clock.option())
	s.cfg.AutoPauseAfter = 0
	perKey := endpoint(srv.URL, sign.GenerateSecret())
	perKey.Endpoint.Ordering = hooklinev1.Ordering_ORDERING_PER_KEY
	perKey.Endpoint.MaxInFlight = 3
	perEndpoint := proto.Clone(perKey).(*hooklinev1.EndpointRecord)
	perEndpoint.Endpoint.Id = "ep_2"
	sealed, err := testKeys.Seal("t", "ep_2", sign.GenerateSecret(), time.Unix(0, 0)) // a secret opens only for its endpoint
	if err != nil {
		t.Fatal(err)
	}
	perEndpoint.Secrets = []*hooklinev1.EndpointSecret{sealed}
	perEndpoint.Endpoint.Ordering = hooklinev1.Ordering_ORDERING_PER_ENDPOINT
	s.store.Put(perKey)
	s.store.Put(perEndpoint)
	e := testEngine(t, s)

	// Publishes, in publish order: 5 keys of ep_1 and ep_2's one lane.
	type pub struct {
		ep, key, lane string
		i             int
	}
	var pubs []pub
	count := map[string]int{}
	for range 120 {
		p := pub{ep: "ep_1", key: fmt.Sprint("k", rng.IntN(5))}
		p.lane = p.ep + ":" + p.key
		if rng.IntN(4) == 0 {
			p.ep, p.key, p.lane = "ep_2", fmt.Sprint("x", rng.IntN(3)), "ep_2"
		}
		p.i = count[p.lane]
		count[p.lane]++
		pubs = append(pubs, p)
		var plan []int
		for rng.IntN(3) == 0 && len(plan) < 3 {
			plan = append(plan, []int{http.StatusInternalServerError, http.StatusServiceUnavailable, http.StatusTooManyRequests}[rng.IntN(3)])
		}
		if rng.IntN(8) == 0 {
			plan = append(plan, http.StatusBadRequest)
		} else {
			plan = append(plan, http.StatusOK)
		}
		rx.plans[fmt.Sprint(p.lane, "/", p.i)] = plan
		if rx.ended[p.lane] == nil {
			rx.ended[p.lane] = map[int]bool{}
		}
	}

	// The simulated log: partition 0 of deliveries; records sent round
	// again wait here until due.
	type pending struct {
		at time.Time
		r  *kgo.Record
	}
	var later []pending
	offset := int64(0)
	append0 := func(r *kgo.Record) {
		r.Topic, r.Partition, r.Offset = s.topics.Deliveries, 0, offset
		offset++
		now := clock.Now()
		if en := e.w.add(r, now, e.work); en != nil {
			e.placeRead(t, en, now)
		}
	}
	terminal := map[string]int{}
	published := 0
	for step := 0; ; step++ {
		if step > 200_000 {
			t.Fatalf("no end after %d steps: %d published, %d ended", step, published, len(terminal))
		}
		// Publish a few at a time, as polls would bring them.
		for range min(1+rng.IntN(8), len(pubs)-published) {
			p := pubs[published]
			published++
			body, _ := json.Marshal(orderedBody{Lane: p.lane, I: p.i})
			d := &hooklinev1.Delivery{DeliveryId: fmt.Sprint("dlv_", published), EventId: fmt.Sprint("evt_", published), TenantId: "t",
				EndpointId: p.ep, EventType: "a.b", Payload: body, Attempt: 1, OrderingKey: p.key, Kind: hooklinev1.DeliveryKind_DELIVERY_KIND_FIRST}
			r, err := hkafka.Record(s.topics.Deliveries, p.ep, d)
			if err != nil {
				t.Fatal(err)
			}
			append0(r)
		}
		now := clock.Now()
		e.sweep(now)
		if err := e.collect(now); err != nil {
			t.Fatal(err)
		}
		e.f.wake(now)
		e.sp.relieve(now)
		e.pump(now)
		for _, pw := range e.w.parts {
			outs, _, _ := e.w.popDone(pw, now, nil)
			for _, r := range outs {
				switch r.Topic {
				case s.topics.Retries, s.topics.Deliveries:
					d := new(hooklinev1.Delivery)
					if err := hkafka.Decode(r, d); err != nil {
						t.Fatal(err)
					}
					at := now
					if d.GetDueAt() != nil {
						at = d.GetDueAt().AsTime()
					}
					later = append(later, pending{at, &kgo.Record{Key: r.Key, Value: r.Value, Headers: r.Headers}})
				case s.topics.Results:
					res := new(hooklinev1.AttemptResult)
					if err := hkafka.Decode(r, res); err != nil {
						t.Fatal(err)
					}
					switch res.GetState() {
					case hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED, hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, hooklinev1.DeliveryState_DELIVERY_STATE_EXPIRED:
						terminal[res.GetDeliveryId()]++
					}
				}
			}
		}
		if e.outstanding > 0 {
			e.waitOutstanding(t, e.outstanding-1)
			continue
		}
		// Release what is due (the scheduler), else move virtual time
		// to the next thing due.
		var due, rest []pending
		next := time.Time{}
		for _, p := range later {
			if !p.at.After(now) {
				due = append(due, p)
				continue
			}
			rest = append(rest, p)
			if next.IsZero() || p.at.Before(next) {
				next = p.at
			}
		}
		later = rest
		for _, p := range due {
			append0(p.r)
		}
		if len(due) > 0 || published < len(pubs) {
			continue
		}
		if w := e.f.nextWake(); !w.IsZero() && (next.IsZero() || w.Before(next)) {
			next = w
		}
		if e.w.records > 0 {
			if r := now.Add(reliefTick); next.IsZero() || r.Before(next) {
				next = r
			}
		}
		if next.IsZero() {
			break
		}
		clock.Set(next)
	}

	rx.mu.Lock()
	defer rx.mu.Unlock()
	for _, b := range rx.bad {
		t.Error(b)
	}
	if len(terminal) != len(pubs) {
		t.Errorf("%d deliveries ended, want all %d", len(terminal), len(pubs))
	}
	for id, n := range terminal {
		if n != 1 {
			t.Errorf("%s ended %d times", id, n)
		}
	}
	for lane, seq := range rx.sequence {
		for i := 1; i < len(seq); i++ {
			if seq[i] <= seq[i-1] {
				t.Errorf("lane %s delivered out of order: %v", lane, seq)
				break
			}
		}
	}
	for id, plan := range rx.plans {
		if rx.tries[id] != len(plan) {
			t.Errorf("%s answered %d times, planned %d", id, rx.tries[id], len(plan))
		}
	}
}

// TestAFailingLaneHoldsOnlyItself: with key a's head out on a retry due
// within --stuck-after, its follower waits in memory while every delivery of key b goes out, and
// an unordered endpoint's lane is untouched by ordering.
func TestAFailingLaneHoldsOnlyItself(t *testing.T) {
	rx := newBodyRecorder(t, `"a0"`)
	s := newTestService(t)
	ep := endpoint(rx.URL, sign.GenerateSecret())
	ep.Endpoint.Ordering = hooklinev1.Ordering_ORDERING_PER_KEY
	ep.Endpoint.OutageModeDisabled = true
	ep.Endpoint.MaxInFlight = 2
	retriesIn(ep, time.Second) // a1 waits for a0 in memory
	s.store.Put(ep)
	e := testEngine(t, s)
	for i, p := range []struct{ key, body string }{{"a", `"a0"`}, {"a", `"a1"`}, {"b", `"b0"`}, {"b", `"b1"`}, {"b", `"b2"`}} {
		d := &hooklinev1.Delivery{DeliveryId: fmt.Sprint("dlv_", i), EventId: "evt", TenantId: "t", EndpointId: "ep_1", EventType: "a.b",
			Payload: []byte(p.body), Attempt: 1, OrderingKey: p.key}
		e.placeAt(t, d, int64(i))
	}
	e.runDry(t)
	l := e.f.lanes["ep_1"]
	if got := rx.bodies(); fmt.Sprint(got) != `["a0" "b0" "b1" "b2"]` && fmt.Sprint(got) != `["b0" "a0" "b1" "b2"]` {
		t.Fatalf("receiver got %v; want a0 (failing) and all of b, never a1", got)
	}
	if b := l.ord.keys["b"]; l.queued != 1 || l.ord.keys["a"].outside["dlv_0"].seq != 0 || len(b.members) != 0 || len(b.outside) != 0 {
		t.Fatalf("waiting %d; want a1 waiting behind a0, which is outside at lane_seq 0, and b done", l.queued)
	}
	// a0 comes back from the retry path at a later offset: it keeps its
	// place, goes first, and then a1.
	retry := &hooklinev1.Delivery{DeliveryId: "dlv_0", EventId: "evt", TenantId: "t", EndpointId: "ep_1", EventType: "a.b",
		Payload: []byte(`"a0"`), Attempt: 2, OrderingKey: "a", LaneSeq: proto.Int64(0)}
	e.placeAt(t, retry, 9)
	e.runDry(t)
	if got := rx.bodies(); len(got) != 5 || got[4] != `"a0"` {
		t.Fatalf("receiver got %v; want a0's retry next and a1 still behind it (a0 fails again)", got)
	}
}

func TestResendsAndTestEventsTakeNoTurnInAnOrderedLane(t *testing.T) {
	ep := endpoint("http://x")
	ep.Endpoint.Ordering = hooklinev1.Ordering_ORDERING_PER_ENDPOINT
	for kind, want := range map[hooklinev1.DeliveryKind]bool{
		hooklinev1.DeliveryKind_DELIVERY_KIND_FIRST:    true,
		hooklinev1.DeliveryKind_DELIVERY_KIND_RETRY:    true,
		hooklinev1.DeliveryKind_DELIVERY_KIND_DEFERRED: true,
		hooklinev1.DeliveryKind_DELIVERY_KIND_RECOVER:  true,
		hooklinev1.DeliveryKind_DELIVERY_KIND_RESEND:   false,
		hooklinev1.DeliveryKind_DELIVERY_KIND_TEST:     false,
	} {
		if got := isOrdered(ep, &hooklinev1.Delivery{Kind: kind}); got != want {
			t.Errorf("%v: ordered %v, want %v", kind, got, want)
		}
	}
	if isOrdered(endpoint("http://x"), &hooklinev1.Delivery{}) {
		t.Error("an endpoint without ordering is unordered")
	}
}

// runDry starts whatever can start and collects it, until nothing is
// left in flight.
func (e *engine) runDry(t testing.TB) {
	t.Helper()
	for {
		e.pump(e.s.now())
		if e.outstanding == 0 {
			return
		}
		e.waitOutstanding(t, 0)
	}
}

// BenchmarkOrderedLanes delivers batches of 1,000 deliveries to one
// endpoint (cap 10, a receiver that answers at once) through the engine,
// without Kafka: unordered, ordered per key over 1,000 keys, and the
// same with one more key whose every delivery fails (its lane stays
// blocked on a retry) beside them. It reports deliveries per second.
//
//	go test -run '^$' -bench OrderedLanes ./dispatcher
func BenchmarkOrderedLanes(b *testing.B) {
	for _, c := range []struct {
		name    string
		order   hooklinev1.Ordering
		blocked bool
	}{
		{"unordered", hooklinev1.Ordering_ORDERING_UNSPECIFIED, false},
		{"per_key_1000", hooklinev1.Ordering_ORDERING_PER_KEY, false},
		{"per_key_1000_one_blocked", hooklinev1.Ordering_ORDERING_PER_KEY, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			s, e := orderedEngine(b, failingOn(b, `"blocked"`), c.order)
			offset := int64(0)
			place := func(key string, body []byte) {
				d := &hooklinev1.Delivery{DeliveryId: fmt.Sprint("dlv_", offset), EventId: "evt", TenantId: "t", EndpointId: "ep_1",
					EventType: "a.b", Payload: body, Attempt: 1, OrderingKey: key}
				e.placeAt(b, d, offset)
				offset++
			}
			if c.blocked {
				place("blocked", []byte(`"blocked"`))
				e.runDry(b)
			}
			delivered := 0
			for b.Loop() {
				for i := range 1000 {
					place(fmt.Sprint("k", i), []byte(`{}`))
					if c.blocked && i%100 == 0 {
						place("blocked", []byte(`"blocked"`)) // waits behind the failing head
					}
				}
				e.runDry(b)
				delivered += 1000
				for _, pw := range e.w.parts {
					e.w.popDone(pw, s.now(), nil)
				}
			}
			b.ReportMetric(float64(delivered)/b.Elapsed().Seconds(), "deliveries/s")
		})
	}
}

// placeAt places d as read at offset of partition 0, as a poll would.
func (e *engine) placeAt(t testing.TB, d *hooklinev1.Delivery, offset int64) {
	t.Helper()
	r, err := hkafka.Record(e.s.topics.Deliveries, d.GetEndpointId(), d)
	if err != nil {
		t.Fatal(err)
	}
	r.Offset = offset
	if en := e.w.add(r, e.s.now(), e.work); en != nil {
		e.placeRead(t, en, e.s.now())
	}
}

// TestAnOrderedLanesRetriedHeadMayProbeAnOutage: outage mode prefers a
// first attempt as its probe, so no event spends two attempts probing,
// and lets a retry probe only after a whole recheck without one. An
// ordered lane's followers never reach the gate before their head ends,
// so its head, retried or not, is as good a probe as a first attempt:
// otherwise every lane of an ordered endpoint in an outage waited a
// whole --outage-recheck (2 min) for each head.
func TestAnOrderedLanesRetriedHeadMayProbeAnOutage(t *testing.T) {
	clock := newFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newTestService(t, clock.option())
	ordered := endpoint("http://127.0.0.1:1/h", sign.GenerateSecret())
	ordered.Endpoint.Ordering = hooklinev1.Ordering_ORDERING_PER_KEY
	unordered := proto.Clone(ordered).(*hooklinev1.EndpointRecord)
	unordered.Endpoint.Id, unordered.Endpoint.Ordering = "ep_unordered", hooklinev1.Ordering_ORDERING_UNORDERED
	now := clock.Now()
	for _, ep := range []*hooklinev1.EndpointRecord{ordered, unordered} {
		for _, dlv := range []string{"d1", "d2"} {
			s.rcv.Observe(ep.GetEndpoint().GetId(), dlv, false, false, now, health.Thresholds{FailingAfter: 5, OutageAfter: 2})
		}
	}
	retry := func(ep *hooklinev1.EndpointRecord) *hooklinev1.Delivery {
		return &hooklinev1.Delivery{DeliveryId: "d1", EndpointId: ep.GetEndpoint().GetId(), Attempt: 2, OrderingKey: "k",
			Kind: hooklinev1.DeliveryKind_DELIVERY_KIND_RETRY}
	}
	if g, _ := s.handler.gate(retry(unordered), unordered, now); g != health.Hold {
		t.Fatalf("an unordered endpoint's retry in an outage: gate %v, want a hold (a first attempt probes)", g)
	}
	if g, _ := s.handler.gate(retry(ordered), ordered, now); g != health.Probe {
		t.Fatalf("an ordered lane's retried head in an outage: gate %v, want the probe", g)
	}
	if g, _ := s.handler.gate(retry(ordered), ordered, now); g != health.Hold {
		t.Fatalf("a second head while the probe is out: gate %v, want a hold", g)
	}
}

// TestARetriedHeadIsNotHeldBackByItsOwnFollowers: a head that comes back
// from the retry path (at an offset above its waiting followers) and
// fails again writes its next retry only when the partition's watermark
// passes it — which its followers, waiting for it below, held for
// --stuck-after (found by TestOrderedDeliveryProperty: every retry after
// the first took 10 s). Its followers are spilled instead, so the retry
// is committed at once.
func TestARetriedHeadIsNotHeldBackByItsOwnFollowers(t *testing.T) {
	s, e := orderedEngine(t, failingOn(t, `"a0"`), hooklinev1.Ordering_ORDERING_PER_KEY)
	for i, body := range []string{`"a0"`, `"a1"`, `"a2"`} {
		e.placeAt(t, &hooklinev1.Delivery{DeliveryId: fmt.Sprint("dlv_", i), EventId: "evt", TenantId: "t", EndpointId: "ep_1", EventType: "a.b",
			Payload: []byte(body), Attempt: 1, OrderingKey: "a"}, int64(i))
	}
	e.runDry(t)
	retries := func() (n int) {
		for _, pw := range e.w.parts {
			outs, _, _ := e.w.popDone(pw, s.now(), nil)
			for _, r := range outs {
				if r.Topic == s.topics.Retries {
					n++
				}
			}
		}
		return n
	}
	if n := retries(); n != 1 {
		t.Fatalf("%d retries committed after a0's first attempt, want 1", n)
	}
	// a0 is back at offset 9, above a1 and a2, and fails again.
	e.placeAt(t, &hooklinev1.Delivery{DeliveryId: "dlv_0", EventId: "evt", TenantId: "t", EndpointId: "ep_1", EventType: "a.b",
		Payload: []byte(`"a0"`), Attempt: 2, OrderingKey: "a", LaneSeq: proto.Int64(0), Kind: hooklinev1.DeliveryKind_DELIVERY_KIND_RETRY}, 9)
	e.runDry(t)
	if n := retries(); n != 3 {
		t.Fatalf("%d records for the retry path committable after a0's second attempt, want 3 (its retry, a1 and a2 spilled): its followers hold the watermark below it", n)
	}
	k := e.f.lanes["ep_1"].ord.keys["a"]
	if len(k.outside) != 3 || k.outside["dlv_1"].seq != 1 || k.outside["dlv_2"].seq != 2 {
		t.Fatalf("outside %v; want a0, a1 and a2 at their places", k.outside)
	}
}

// failingOn returns a receiver that answers 500 to the body fail and 204
// to any other.
func failingOn(t testing.TB, fail string) *httptest.Server {
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		if string(raw) == fail {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rx.Close)
	return rx
}

// orderedEngine returns a test Service and its engine with endpoint ep_1
// at rx, ordered by order, cap 10, outage mode off.
func orderedEngine(t testing.TB, rx *httptest.Server, order hooklinev1.Ordering) (*Service, *engine) {
	s := newTestService(t)
	ep := endpoint(rx.URL, sign.GenerateSecret())
	ep.Endpoint.Ordering, ep.Endpoint.MaxInFlight, ep.Endpoint.OutageModeDisabled = order, 10, true
	retriesIn(ep, time.Second) // a retried head's followers wait for it in memory
	s.store.Put(ep)
	return s, testEngine(t, s)
}

// TestAStuckLaneSpillsOnlyItsOwnKey: when an ordered lane's waiting
// follower holds its partition's watermark for --stuck-after, relief
// spills that lane's waiting members, not the waiting members of the
// endpoint's other keys, which are not stuck (found by the badlane bench:
// a failing key made the endpoint's healthy keys' waiting deliveries go
// round the retry path every --stuck-after).
func TestAStuckLaneSpillsOnlyItsOwnKey(t *testing.T) {
	s, e := orderedEngine(t, failingOn(t, `"a0"`), hooklinev1.Ordering_ORDERING_PER_KEY)
	for i, p := range []struct{ key, body string }{{"a", `"a0"`}, {"a", `"a1"`}} {
		e.placeAt(t, &hooklinev1.Delivery{DeliveryId: fmt.Sprint("dlv_", i), EventId: "evt", TenantId: "t", EndpointId: "ep_1", EventType: "a.b",
			Payload: []byte(p.body), Attempt: 1, OrderingKey: p.key}, int64(i))
	}
	e.runDry(t) // a0 out on a retry, a1 waits behind it and holds the watermark
	for _, pw := range e.w.parts {
		e.w.popDone(pw, s.now(), nil) // a0's retry committed
	}
	e.placeAt(t, &hooklinev1.Delivery{DeliveryId: "dlv_2", EventId: "evt", TenantId: "t", EndpointId: "ep_1", EventType: "a.b",
		Payload: []byte(`"b0"`), Attempt: 1, OrderingKey: "b"}, 2) // waits for its turn, not started yet
	b0 := e.f.lanes["ep_1"].ord.keys["b"].members[0]
	e.sp.relieve(s.now().Add(s.cfg.StuckAfter + time.Second))
	k := e.f.lanes["ep_1"].ord.keys
	if _, out := k["a"].outside["dlv_1"]; !out {
		t.Fatal("a1, stuck behind a0, was not spilled")
	}
	if b0.state != entryQueued || len(k["b"].outside) != 0 {
		t.Fatalf("b0 (state %v) was spilled with the stuck key a; want it waiting for its turn", b0.state)
	}
}

// TestMembersOfANewEndpointArePlacedInOffsetOrder: the first deliveries
// of an endpoint the endpoints view does not know yet wait for a sync of
// the view, and the members of an ordered lane must still be placed in
// the order they were read (found by
// TestOrderedLanesSurviveADispatcherRestart, which saw the lane's last
// member delivered first: [4 0 1 2 3], when each had a resolver of its
// own and their syncs came back out of order; now a partition has one).
func TestMembersOfANewEndpointArePlacedInOffsetOrder(t *testing.T) {
	rx := newBodyRecorder(t, "")
	s := newTestService(t)
	e := testEngine(t, s)
	release := make(chan struct{})
	s.readEndpoints = func(ctx context.Context) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for i := range 3 {
		e.placeAt(t, &hooklinev1.Delivery{DeliveryId: fmt.Sprint("dlv_", i), EventId: "evt", TenantId: "t", EndpointId: "ep_1", EventType: "a.b",
			Payload: []byte(fmt.Sprintf(`"m%d"`, i)), Attempt: 1}, int64(i)) // the view does not know ep_1 yet
	}
	ep := endpoint(rx.URL, sign.GenerateSecret())
	ep.Endpoint.Ordering, ep.Endpoint.OutageModeDisabled = hooklinev1.Ordering_ORDERING_PER_ENDPOINT, true
	s.store.Put(ep)
	close(release)
	e.runDry(t)
	if got := rx.bodies(); fmt.Sprint(got) != `["m0" "m1" "m2"]` {
		t.Fatalf("receiver got %v; want the lane in offset order", got)
	}
}

// bodyRecorder is a receiver that records each request's body in
// arrival order and answers 500 to the body fail, 200 to any other.
type bodyRecorder struct {
	*httptest.Server
	mu  sync.Mutex
	got []string
}

func newBodyRecorder(t *testing.T, fail string) *bodyRecorder {
	b := &bodyRecorder{}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		b.mu.Lock()
		b.got = append(b.got, string(raw))
		b.mu.Unlock()
		if string(raw) == fail {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(b.Close)
	return b
}

// bodies is what the receiver got so far.
func (b *bodyRecorder) bodies() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.got)
}
