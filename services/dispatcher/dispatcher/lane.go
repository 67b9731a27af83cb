package dispatcher

import (
	"math"
	"time"

	"github.com/hookline/hookline/platform/endpoints"
	"golang.org/x/time/rate"
)

// A lane is one endpoint's queue in the dispatcher: its deliveries wait
// here, in publish order, for the endpoint's concurrency cap and rate
// limit, in memory, burning no attempt and writing nothing to Kafka.
// Deliveries are keyed by endpoint id, so one dispatcher owns an
// endpoint's lane and its limits are exact while it does.
//
// A lane is the unit the fair scheduler (fair.go) serves. Ordered
// delivery fits the same shape: an ordered lane is one with cap 1 whose
// head leaves only at a terminal outcome, and a per-key ordering is a
// lane per (endpoint, key) sharing the endpoint's limiter.
//
// Only the loop goroutine touches a lane.
type lane struct {
	id     string // endpoint id
	tenant *tenant

	queue    []*entry // queue[qhead:] wait, oldest first; dropped ones are skipped
	qhead    int
	queued   int   // live entries waiting
	qbytes   int64 // their bytes
	qpayload int64 // their payloads' bytes (what a batch's body holds)

	inFlight int
	cap      int
	perSec   float64 // 0: no rate limit
	lim      *rate.Limiter

	// Scheduling state (fair.go).
	inRing bool      // in its tenant's ring of runnable lanes
	wakeAt time.Time // when its rate allows the next start; zero when not waiting
	// heldUntil is when the lane looks again at an automatic pause of
	// its endpoint that is pending (written, not yet read by the
	// endpoints view, nor dropped): it starts nothing before.
	heldUntil time.Time
	heapIdx   int  // index in the wake heap, -1 when not in it
	working   bool // counted in its tenant's active lanes

	// spillNext is the due time the next spilled delivery gets: spilled
	// deliveries come back spaced at the rate the lane drains.
	spillNext time.Time
	// latency is a moving average of attempt latency, to estimate how
	// fast a lane bound by its cap drains.
	latency time.Duration
	// idleSince is when the lane last had no work, for pruning.
	idleSince time.Time

	// ord is the ordered part of an ordered endpoint's lane (ordered.go);
	// nil for an unordered one.
	ord *ordering
	// batch is its endpoint's batch settings (batch.go); off by default.
	batch batching
}

func newLane(id string, t *tenant) *lane {
	return &lane{id: id, tenant: t, heapIdx: -1}
}

// configure applies the endpoint's limits: cap attempts in flight and
// perSec starts per second (0: none). Starts are spaced 1/perSec apart
// with a burst of max(1, ⌈perSec × 20 ms⌉), so a wake-up a little late
// loses no throughput and no second holds more than perSec + burst.
//
// A positive rate below endpoints.RateLimitFloor (a record written before
// ingest refused one) is the floor: its spacing would not fit a
// time.Duration.
func (l *lane) configure(capacity int, perSec float64, now time.Time) {
	l.cap = max(capacity, 1)
	if perSec > 0 {
		perSec = max(perSec, endpoints.RateLimitFloor)
	}
	if perSec == l.perSec {
		return
	}
	l.perSec = perSec
	if perSec <= 0 {
		l.lim = nil
		return
	}
	burst := max(1, int(math.Ceil(perSec*0.02)))
	if l.lim == nil {
		l.lim = rate.NewLimiter(rate.Limit(perSec), burst)
		return
	}
	l.lim.SetLimitAt(now, rate.Limit(perSec))
	l.lim.SetBurstAt(now, burst)
}

// push appends e to the queue.
func (l *lane) push(e *entry, now time.Time) {
	e.state, e.lane, e.queuedAt = entryQueued, l, now
	l.queue = append(l.queue, e)
	l.queued++
	l.qbytes += e.size
	l.qpayload += payloadSize(e)
}

// payloadSize is the bytes of e's payload.
func payloadSize(e *entry) int64 { return int64(len(e.d.GetPayload())) }

// peek returns the oldest live waiting entry (of an ordered lane: the
// head of a keyLane that may start), or nil.
func (l *lane) peek() *entry {
	if l.ord != nil {
		if e := l.ord.peek(); e != nil {
			return e
		}
	}
	for l.qhead < len(l.queue) {
		if e := l.queue[l.qhead]; e.state == entryQueued {
			return e
		}
		l.queue[l.qhead] = nil
		l.qhead++
	}
	l.compact()
	return nil
}

// pop removes and returns the oldest live waiting entry, or nil.
func (l *lane) pop() *entry {
	if l.ord != nil {
		if e := l.ord.pop(); e != nil {
			l.queued--
			l.qbytes -= e.size
			l.qpayload -= payloadSize(e)
			return e
		}
	}
	e := l.peek()
	if e == nil {
		return nil
	}
	l.queue[l.qhead] = nil
	l.qhead++
	l.queued--
	l.qbytes -= e.size
	l.qpayload -= payloadSize(e)
	if l.qhead > 64 && l.qhead*2 >= len(l.queue) {
		l.compact()
	}
	return e
}

// unqueue accounts for a waiting entry dropped in place (its partition
// went away); peek skips it later.
func (l *lane) unqueue(e *entry) {
	l.queued--
	l.qbytes -= e.size
	l.qpayload -= payloadSize(e)
	if e.key != nil && l.ord != nil {
		l.ord.waiting--
	}
}

// runnable reports whether something waiting may start, cap and rate
// aside: any waiting delivery of an unordered lane, a startable keyLane's
// head of an ordered one.
func (l *lane) runnable() bool {
	if l.ord == nil {
		return l.queued > 0
	}
	return l.queued > l.ord.waiting || l.ord.peek() != nil
}

func (l *lane) compact() {
	n := copy(l.queue, l.queue[l.qhead:])
	clear(l.queue[n:])
	l.queue = l.queue[:n]
	l.qhead = 0
}

// capOK reports whether the cap allows one more attempt.
func (l *lane) capOK() bool { return l.inFlight < l.cap }

// rateReady reports whether the rate allows a start at now, and if not,
// when it will.
func (l *lane) rateReady(now time.Time) (bool, time.Time) {
	if l.lim == nil {
		return true, time.Time{}
	}
	tokens := l.lim.TokensAt(now)
	if tokens >= 1 {
		return true, time.Time{}
	}
	wait := clampedDuration(math.Ceil((1 - tokens) / l.perSec * float64(time.Second)))
	return false, now.Add(max(wait, time.Millisecond))
}

// take spends the rate's token for a start at now.
func (l *lane) take(now time.Time) {
	if l.lim != nil {
		l.lim.AllowN(now, 1)
	}
}

// observe folds an attempt's latency into the lane's average.
func (l *lane) observe(latency time.Duration) {
	if l.latency == 0 {
		l.latency = latency
		return
	}
	l.latency += (latency - l.latency) / 8
}

// interval is how long the lane takes per delivery when it is busy: the
// rate's spacing, or its cap's share of an attempt's latency, whichever
// is slower.
func (l *lane) interval() time.Duration {
	var d time.Duration
	if l.perSec > 0 {
		d = clampedDuration(float64(time.Second) / l.perSec)
	}
	if l.latency > 0 && l.cap > 0 {
		d = max(d, l.latency/time.Duration(l.cap))
	}
	return d
}

// maxWait bounds every wait the lane computes from its rate: longer than
// any spacing the rate floor allows, far from time.Duration's overflow.
const maxWait = 1000 * 24 * time.Hour

// clampedDuration converts ns, a float64 count of nanoseconds, to a Duration
// clamped to [0, maxWait]: a float64 beyond int64 converts to MinInt64
// on amd64, which made a lane wake every millisecond and never start.
func clampedDuration(ns float64) time.Duration {
	switch {
	case !(ns > 0): // zero, negative and NaN
		return 0
	case ns >= float64(maxWait):
		return maxWait
	}
	return time.Duration(ns)
}

// spillDue returns when a delivery spilled now should come back: after
// everything waiting ahead of it has had its turn, and after the
// deliveries spilled before it.
func (l *lane) spillDue(now time.Time, ahead int, minDelay time.Duration) time.Time {
	per := l.interval()
	due := now.Add(max(minDelay, clampedDuration(float64(ahead)*float64(per))))
	if due.Before(l.spillNext) {
		due = l.spillNext
	}
	l.spillNext = due.Add(per)
	return due
}
