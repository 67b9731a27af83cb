package e2e

import (
	"encoding/json"
	"fmt"
	"github.com/hookline/hookline/sdk/batch"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
)

// The simulation's model (make sim; docs/DESIGN.md "Simulation"): what
// every receiver answered, when each delivery's first attempt started
// and its terminal try returned, on the one clock of the test process.
// The checker (sim_check_test.go) compares it with what the services
// wrote.

// simStep is what one try of a delivery meets at its receiver.
type simStep uint8

const (
	simOK      simStep = iota // 200
	simSlow                   // 200, its body trickled over 200 ms
	simPerm                   // 400: permanent
	sim500                    // transient
	sim429                    // transient, Retry-After: 1
	sim503                    // transient, Retry-After: 1
	simTimeout                // no answer within the endpoint's 1 s timeout
	simReset                  // the connection reset without an answer
	simPanic                  // a worker fault: the dispatcher panics before sending
	simTooBig                 // 413: a receiver's body limit; transient (SPEC R-CLASS: other 4xx are retried)
)

func (s simStep) String() string {
	return [...]string{"200", "slow200", "400", "500", "429", "503", "hang", "reset", "fault", "413"}[s]
}

// simMaxFaults is the simulated dispatchers' --max-worker-faults.
const simMaxFaults = 3

// simAttemptTimeout is every simulated endpoint's attempt timeout.
const simAttemptTimeout = time.Second

// simEvent is one event's payload: its place in its lane and padding to
// its drawn size.
type simEvent struct {
	Sim  string `json:"sim"`            // endpoint/key/i
	Skip bool   `json:"skip,omitempty"` // its endpoint's filter refuses it (sim_content_test.go)
	Pad  string `json:"pad,omitempty"`
}

// simEndpoint is one endpoint of a seed's world.
type simEndpoint struct {
	name        string
	ordering    hooklinev1.Ordering
	block       bool // on_head_failure: block (else skip)
	keys        int
	maxAttempts uint32
	maxInFlight uint32
	// batch is its batch's max_events (0: not batching), batchWait its
	// max_wait (sim_batch_test.go).
	batch     uint32
	batchWait time.Duration
	id        string
	// filter and transform are its content filter and transformation
	// (sim_content_test.go); "" for none.
	filter, transform string
	// created is closed once an endpoint created mid-run exists (nil:
	// created before the run); deletedAt is when its deletion was asked
	// for (sim_lifecycle_test.go).
	created   chan struct{}
	deletedAt time.Time
	// streak is the permanent failures in a row its receiver answered
	// since the last automatic pause or 2xx, longestStreak the longest
	// before (sim_autopause_test.go); posts the POSTs it got.
	streak, longestStreak, posts int
	// autoPaused says Hookline paused it at least once; lastEnd is
	// when the last of its deliveries ended (an endpoint paused and
	// resumed again and again is served in cycles: sim_check_test.go's
	// liveness counts from its last progress).
	autoPaused bool
	lastEnd    time.Time

	inFlight    int // POSTs the receiver is answering now
	maxObserved int
	// open are the POSTs the receiver is answering now, each by when
	// the dispatcher gives up on it (its attempt's start, from the
	// before-attempt hook, plus the attempt timeout). One given up on no
	// longer holds a slot of the endpoint's cap, though its handler
	// learns of it only when the connection's close reaches it (seed 25:
	// a timed-out attempt's handler still waiting when the dispatcher
	// started the next, 1 ms later, taken for 2 in flight at cap 1).
	open     map[int]time.Time
	nextPost int
}

// holding is how many of ep's open POSTs the dispatcher has not given up
// on at now (model lock held).
func (ep *simEndpoint) holding(now time.Time) int {
	n := 0
	for _, giveUp := range ep.open {
		if now.Before(giveUp) {
			n++
		}
	}
	return n
}

func (ep *simEndpoint) ordered() bool { return ep.ordering != hooklinev1.Ordering_ORDERING_UNORDERED }

// simMember is one delivery: its plan and what happened to it.
type simMember struct {
	id         string // endpoint/key/i
	ep         *simEndpoint
	key        string
	lane       string // "" when unordered
	i          int    // place in its lane
	size       int
	plan       []simStep
	at         time.Duration // publish offset in the fault phase
	deliveryID string
	accepted   bool // PublishEvent returned OK
	published  bool // PublishEvent was called
	filtered   bool // its endpoint's filter refuses it: no delivery, never accepted (sim_content_test.go)

	cursor  int
	attempt uint32
	faults  int
	started time.Time // first attempt (or worker fault)
	ended   time.Time // the terminal try's return
	// statusAt is when the terminal try's 2xx status went out, when
	// that came before its return (a slow body): see settledAt.
	statusAt  time.Time
	delivered bool // the terminal try was a 2xx
	faultOut  bool // it ran out of worker-fault chances (dead-lettered; blocks no lane)
	// endpointDeleted says its end was its endpoint's deletion (its one
	// terminal result ENDPOINT_DELETED), taken at the deletion's time.
	endpointDeleted bool
	// setAsideAt is when a dispatcher first set it aside, a record it
	// needs refused (dispatcher.WithSetAside): FAILED with a dead letter
	// and no attempt, an end no receiver sees. setAside says the checker
	// took that as its end (its terminal result is FAILED).
	setAsideAt time.Time
	setAside   bool
	lastBefore time.Time // the latest attempt's start (the before-attempt hook)
	posts      int       // POSTs the receiver got
	dups       int       // POSTs after the terminal try returned
	overBudget,
	early int // attempts numbered past the budget; attempts before due
}

// settledAt is when m's lane may take m as ended (O1): its terminal
// try's status going out, or its return — or, if earlier, when a
// dispatcher set it aside: that ends it in its lane at once, as a
// terminal try does. Either may be undone by a fault before its
// settlement commits (a crash, a lost partition), and the member is then
// attempted again after its followers began: a duplicate, not a breach of
// its lane's order (make sim seed 17: a member set aside after its retry
// record was refused, its follower started, then the partition moved
// before the set-aside committed and the next owner delivered it).
func (m *simMember) settledAt() time.Time {
	at := m.ended
	if !m.statusAt.IsZero() && !m.ended.IsZero() && m.delivered {
		at = m.statusAt
	}
	if !m.setAsideAt.IsZero() && (at.IsZero() || m.setAsideAt.Before(at)) {
		at = m.setAsideAt
	}
	return at
}

func (m *simMember) step() simStep { return m.plan[min(m.cursor, len(m.plan)-1)] }

// simModel is the receivers of every endpoint and the dispatchers'
// before-attempt hook.
type simModel struct {
	mu      sync.Mutex
	members map[string]*simMember
	lanes   map[string][]*simMember // in publish order
	// byDelivery are the accepted members by delivery id.
	byDelivery map[string]*simMember
	t0         time.Time
	// changing is until when the owner of an endpoint may be changing (a
	// crash, join, leave or rebalance, plus the session timeout): the cap
	// is checked outside it.
	changing  time.Time
	capBreach []string
	// inFlight is the POSTs being answered now at every endpoint,
	// peakInFlight the most at once, and posts every POST: the duplicates
	// bound counts what a fault can find in flight and what completes at
	// the rate they show (sim_check_test.go).
	inFlight, peakInFlight, posts, orderedPosts int
	// untransformed are POSTs to a transforming endpoint that lack the
	// header its script sets (sim_content_test.go).
	untransformed []string
}

func newSimModel() *simModel {
	return &simModel{members: map[string]*simMember{}, lanes: map[string][]*simMember{}, byDelivery: map[string]*simMember{}, t0: time.Now()}
}

func (sm *simModel) member(payload []byte) *simMember {
	var ev simEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil
	}
	return sm.members[ev.Sim]
}

// membersOf returns the members a payload or a batch's body carries, in
// order (sim_batch_test.go), or none.
func (sm *simModel) membersOf(body []byte) []*simMember {
	if m := sm.member(body); m != nil {
		return []*simMember{m}
	}
	wire, err := batch.Decode(body)
	if err != nil {
		return nil
	}
	var ms []*simMember
	for _, w := range wire {
		if m := sm.member(w.Payload); m != nil {
			ms = append(ms, m)
		}
	}
	return ms
}

// ownershipMayChange marks that endpoints may have two owners until d
// from now.
func (sm *simModel) ownershipMayChange(d time.Duration) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if u := time.Now().Add(d); u.After(sm.changing) {
		sm.changing = u
	}
}

func (sm *simModel) end(m *simMember, at time.Time, delivered bool) {
	if m.ended.IsZero() {
		m.ended, m.delivered = at, delivered
		if at.After(m.ep.lastEnd) {
			m.ep.lastEnd = at
		}
	}
}

// before is a dispatcher's hook as an attempt begins; now is that
// dispatcher's clock (skewed when the seed skews it).
func (sm *simModel) before(now func() time.Time) func(*hooklinev1.Delivery) {
	return func(d *hooklinev1.Delivery) {
		at := time.Now()
		own := now()
		sm.mu.Lock()
		ms := sm.membersOf(d.GetPayload()) // a batch's attempt is each member's
		if len(ms) == 0 {
			sm.mu.Unlock()
			return
		}
		for _, m := range ms {
			m.attempt = d.GetAttempt()
			if m.attempt > m.ep.maxAttempts {
				m.overBudget++
			}
			if due := d.GetDueAt(); due != nil && own.Before(due.AsTime().Add(-5*time.Millisecond)) {
				m.early++
			}
			if m.started.IsZero() {
				m.started = at
			}
			m.lastBefore = at
		}
		if ms[0].step() != simPanic { // a batch's first member's plan is the batch's
			sm.mu.Unlock()
			return
		}
		for _, m := range ms {
			m.cursor++
			m.faults++
			if m.faults >= simMaxFaults && m.ended.IsZero() {
				sm.end(m, at, false) // the last chance: dead-lettered now
				m.faultOut = true
			}
		}
		sm.mu.Unlock()
		panic("sim: injected worker fault")
	}
}

// setAside is the dispatchers' hook as one sets a delivery aside
// (dispatcher.WithSetAside): it ends there, unless a later owner, which
// does not share the blame, ends it otherwise (check decides).
func (sm *simModel) setAside(d *hooklinev1.Delivery) {
	at := time.Now()
	sm.mu.Lock()
	defer sm.mu.Unlock()
	var ms []*simMember
	for _, mem := range d.GetBatch().GetMembers() { // a batch: each member
		if m := sm.byDelivery[mem.GetDeliveryId()]; m != nil {
			ms = append(ms, m)
		}
	}
	if m := sm.byDelivery[d.GetDeliveryId()]; m != nil {
		ms = append(ms, m)
	}
	if len(ms) == 0 {
		ms = sm.membersOf(d.GetPayload()) // set aside before its publish returned
	}
	for _, m := range ms {
		if m.setAsideAt.IsZero() {
			m.setAsideAt = at
		}
	}
}

func (sm *simModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	sm.mu.Lock()
	ms := sm.membersOf(body) // a batch's members answered as one (sim_batch_test.go)
	if len(ms) == 0 {
		sm.mu.Unlock()
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	m := ms[0] // a batch's first member's plan is the batch's
	if m.ep.transform != "" && r.Header.Get(simTransformHeader) != "1" && r.Header.Get(batch.HeaderSize) == "" {
		// (A batch carries its members' transformed bodies, not a
		// transformation's headers: docs/operator-guide.md, "Batches".)
		sm.untransformed = append(sm.untransformed, m.id)
	}
	s := m.step()
	for _, x := range ms {
		x.cursor++
		x.posts++
		if !x.ended.IsZero() {
			x.dups++
		}
	}
	last := m.attempt >= m.ep.maxAttempts
	ep := m.ep
	ep.posts++
	ep.answeredStreak(s)
	ep.inFlight++
	ep.maxObserved = max(ep.maxObserved, ep.inFlight)
	// The world's POSTs, in flight and in all, count deliveries: a
	// batch re-POSTed after a move of work duplicates every member.
	sm.inFlight += len(ms)
	sm.peakInFlight = max(sm.peakInFlight, sm.inFlight)
	sm.posts += len(ms)
	if ep.ordered() {
		sm.orderedPosts++
	}
	now := time.Now()
	if ep.open == nil {
		ep.open = map[int]time.Time{}
	}
	post := ep.nextPost
	ep.nextPost++
	began := m.lastBefore
	if began.IsZero() || began.After(now) {
		began = now
	}
	ep.open[post] = began.Add(simAttemptTimeout)
	if cap := int(ep.maxInFlight); cap > 0 && now.After(sm.changing) {
		if n := ep.holding(now); n > cap {
			sm.capBreach = append(sm.capBreach, fmt.Sprintf("%s: %d in flight, cap %d, at +%v", ep.name, n, cap, time.Since(sm.t0).Round(time.Millisecond)))
		}
	}
	sm.mu.Unlock()
	defer func() {
		sm.mu.Lock()
		ep.inFlight--
		delete(ep.open, post)
		sm.inFlight -= len(ms)
		sm.mu.Unlock()
	}()
	code := http.StatusOK
	switch s {
	case simPerm:
		code = http.StatusBadRequest
	case simTooBig:
		code = http.StatusRequestEntityTooLarge
	case sim500, simPanic:
		code = http.StatusInternalServerError
	case sim429:
		code = http.StatusTooManyRequests
	case sim503:
		code = http.StatusServiceUnavailable
	case simTimeout:
		select { // the dispatcher gives up at the endpoint's 1 s timeout
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
		// The try ended when the dispatcher gave up, which this
		// goroutine learns only after it: no sooner than the endpoint's
		// timeout after the attempt began (the before-attempt hook runs
		// first), so a follower started in between is not taken for one
		// started before its predecessor's end.
		sm.mu.Lock()
		at := time.Now()
		if gaveUp := m.lastBefore.Add(simAttemptTimeout); gaveUp.Before(at) {
			at = gaveUp
		}
		sm.mu.Unlock()
		for _, x := range ms {
			sm.answeredAt(x, s, last, at)
		}
		return
	case simReset:
		// The try ends as the reset goes out, not after: the dispatcher
		// may take the reset, end the delivery (its last attempt) and
		// start its lane's next member before this goroutine runs again
		// (seeds 8 and 15 of 1..16: a follower "started 1 ms before" its
		// predecessor's reset was recorded).
		for _, x := range ms {
			sm.answered(x, s, last)
		}
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				if tc, ok := conn.(*net.TCPConn); ok {
					_ = tc.SetLinger(0) // close sends RST
				}
				_ = conn.Close()
			}
		}
		return
	}
	if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(code)
	if s == simSlow {
		// The lane may move on as the status goes out with the first
		// chunk: the dispatcher takes a 2xx as delivered once it has
		// the status, and reads the body only until the attempt's
		// timeout (seed 5, on a loaded machine: the dispatcher gave up
		// reading at 1 s and started the lane's next member 14 ms
		// before this handler returned, taken for an O1 violation).
		// The try itself ends as the handler returns (duplicates count
		// the POSTs after that, as before).
		f, _ := w.(http.Flusher)
		for i := range 4 {
			_, _ = w.Write([]byte(strings.Repeat("x", 64)))
			if f != nil {
				f.Flush()
			}
			if i == 0 {
				for _, x := range ms {
					sm.statusOut(x)
				}
			}
			time.Sleep(50 * time.Millisecond) // the receiver's behaviour, not a wait
		}
	}
	for _, x := range ms {
		sm.answered(x, s, last)
	}
}

// statusOut records that a 2xx status went out for m: its lane may move
// on from then (settledAt), before the try's body ends.
func (sm *simModel) statusOut(m *simMember) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if m.ended.IsZero() && m.statusAt.IsZero() {
		m.statusAt = time.Now()
	}
}

// answered records the end of a try as its answer goes out.
func (sm *simModel) answered(m *simMember, s simStep, last bool) {
	sm.answeredAt(m, s, last, time.Now())
}

// answeredAt records the end of a try at now.
func (sm *simModel) answeredAt(m *simMember, s simStep, last bool, now time.Time) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	switch {
	case s == simOK || s == simSlow:
		sm.end(m, now, true)
	case s == simPerm, last: // 413 is retried like every 4xx R-CLASS does not name; its last try ends it
		sm.end(m, now, false)
	}
}

// drawPlan draws one delivery's plan: up to three transient steps (at
// most one worker fault), then 200 or, now and then, 400; rarely a plan
// that runs out of attempts or of worker-fault chances.
func drawPlan(rng *rand.Rand, maxAttempts uint32, size int) []simStep {
	switch {
	case size > 512<<10 && rng.IntN(2) == 0:
		return []simStep{simTooBig} // receivers limit bodies
	case rng.IntN(30) == 0:
		plan := make([]simStep, maxAttempts)
		for i := range plan {
			plan[i] = []simStep{sim500, sim503, simReset}[rng.IntN(3)]
		}
		return plan
	case rng.IntN(60) == 0:
		return []simStep{simPanic, simPanic, simPanic}
	}
	var plan []simStep
	faulted := false
	for rng.IntN(3) == 0 && len(plan) < 3 && uint32(len(plan))+1 < maxAttempts {
		s := []simStep{sim500, sim429, sim503, simTimeout, simReset, simPanic}[rng.IntN(6)]
		if s == simPanic {
			if faulted {
				s = sim500
			}
			faulted = true
		}
		plan = append(plan, s)
	}
	switch rng.IntN(16) {
	case 0:
		return append(plan, simPerm)
	case 1, 2:
		return append(plan, simSlow)
	}
	return append(plan, simOK)
}

// drawSize draws a payload size: mostly small, now and then large, now
// and then within 256 bytes of limit (ingest's --max-payload-bytes).
func drawSize(rng *rand.Rand, limit int) int {
	switch n := rng.IntN(100); {
	case n == 0:
		return limit - rng.IntN(256)
	case n < 6:
		return 16<<10 + rng.IntN(240<<10)
	}
	return 40 + rng.IntN(2000)
}

func (m *simMember) payload() []byte {
	b, _ := json.Marshal(simEvent{Sim: m.id, Skip: m.filtered})
	if pad := m.size - len(b) - len(`,"pad":""`); pad > 0 {
		b, _ = json.Marshal(simEvent{Sim: m.id, Skip: m.filtered, Pad: strings.Repeat("p", pad)})
	}
	return b
}
