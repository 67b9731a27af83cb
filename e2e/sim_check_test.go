package e2e

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
)

// The checker of make sim: what must hold after the faults stop and the
// quiet period passes (docs/DESIGN.md "Simulation"). Each rule counts
// its violations; any violation fails the seed.

// simReport is one seed's row of the table.
type simReport struct {
	seed       uint64
	faults     map[string]int
	deliveries int // accepted
	lost       int // accepted, no terminal result, not held behind a blocked head
	order      int // O1 (first attempts in publish order) and O5 (a blocked head holds its followers)
	stalls     int // not ended within simLiveness of the faults stopping
	storms     int // storm bounds exceeded
	dups       int // POSTs after the delivery's terminal try
	other      int // several terminal results, attempts past the budget, POSTs before due, cap exceeded
	aborts     int
	records    float64 // Kafka records written per delivery
	notes      []string
	took       time.Duration
	// stalled are the delivery ids of the first stalled deliveries,
	// which a stall dump traces through the topics (trail).
	stalled []string
	// doubled are the first deliveries with more than one terminal
	// result, traced like stalled ones.
	doubled []string
}

func (r *simReport) violations() int { return r.lost + r.order + r.stalls + r.storms + r.other }

func (r *simReport) note(format string, args ...any) {
	if len(r.notes) < 40 {
		r.notes = append(r.notes, fmt.Sprintf(format, args...))
	}
}

// heldBehindBlock says m waits behind a blocked head of its lane: an
// earlier member of a block lane ended without a 2xx (model lock held).
func (sm *simModel) heldBehindBlock(m *simMember) bool {
	if m.lane == "" || !m.ep.block {
		return false
	}
	for _, o := range sm.lanes[m.lane] {
		if o == m {
			return false
		}
		if o.blocks() {
			return true
		}
	}
	return false
}

// blocks says m, ended, blocks its lane: a block endpoint's head that
// failed permanently or ran out of attempts (DESIGN.md "Block and
// skip"); one dead-lettered for worker faults, or set aside because a
// record it needs was refused (no attempt failed), lets the lane go on.
func (m *simMember) blocks() bool {
	return m.accepted && m.ep.block && !m.ended.IsZero() && !m.delivered && !m.faultOut && !m.setAside
}

// stalled returns the members of open that stood still for simLiveness
// by now: an unordered delivery (or an ordered lane's first open member
// whose lane never moved) once simLiveness passed since quiet; an ordered
// lane's member once simLiveness passed since the later of quiet and its
// lane's last end (a lane is served one member at a time, so a long lane
// of failing members takes the sum of their schedules: progress, not a
// stall; make sim seed 32 on main: a per_endpoint lane still ending a
// member every few seconds when the flat 45 s ended).
func (sm *simModel) stalled(open []*simMember, quiet, now time.Time) []*simMember {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	var out []*simMember
	for _, m := range open {
		from := quiet
		if m.ep.autoPaused && m.ep.lastEnd.After(from) {
			// Paused by Hookline and resumed by the operator, cycle
			// after cycle, a few deliveries each: progress.
			from = m.ep.lastEnd
		}
		if m.lane != "" {
			for _, o := range sm.lanes[m.lane] {
				if end := o.ended; end.After(from) {
					from = end
				}
				if end := o.setAsideAt; end.After(from) {
					from = end
				}
			}
		}
		if now.Sub(from) >= simLiveness {
			out = append(out, m)
		}
	}
	return out
}

// open returns the accepted deliveries that have not ended (at their
// receiver, or set aside by a dispatcher) and do not wait behind a
// blocked head.
func (sm *simModel) open(members []*simMember) []*simMember {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	var out []*simMember
	for _, m := range members {
		if m.accepted && m.ended.IsZero() && m.setAsideAt.IsZero() && !sm.heldBehindBlock(m) {
			out = append(out, m)
		}
	}
	return out
}

func (w *simWorld) check() *simReport {
	t := w.t
	r := &simReport{seed: w.seed, faults: w.counts}
	// Liveness: every delivery that can end ends within simLiveness; a
	// member of an ordered lane, served one at a time, within
	// simLiveness of its lane's last progress (w.model.stalled).
	quietFrom := time.Now()
	hardStop := quietFrom.Add(simLaneLiveness)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	open := w.model.open(w.members)
	lastRead := time.Now()
	for len(open) > 0 && len(w.model.stalled(open, quietFrom, time.Now())) < len(open) && time.Now().Before(hardStop) {
		select {
		case <-tick.C:
		case <-t.Context().Done():
			return r
		}
		if time.Since(lastRead) >= time.Second {
			w.endDeleted(open) // a deleted endpoint's members end in the results topic
			lastRead = time.Now()
		}
		open = w.model.open(w.members)
	}
	w.endDeleted(open)
	open = w.model.open(w.members)
	r.stalls = len(open)
	for i, m := range open {
		if i < simTrailDeliveries {
			r.stalled = append(r.stalled, m.deliveryID)
		}
		if i < 8 {
			r.note("stall: %s (%s, plan %v, %d bytes) open %v after the faults stopped; %d POSTs, attempt %d", m.id, m.deliveryID, m.plan, m.size, simLiveness, m.posts, m.attempt)
		}
	}
	t.Logf("seed %d: quiet after %v, %d open", w.seed, time.Since(quietFrom).Round(time.Millisecond), len(open))

	// What the services wrote: terminal results by delivery.
	terminal := w.terminalStates()
	w.model.mu.Lock()
	defer w.model.mu.Unlock()
	injectedRefusals := w.counts["produce-err"] > 0 || w.counts["pause-then-abort"] > 0
	maxDup := 0
	var worst *simMember
	for _, m := range w.members {
		if !m.accepted {
			continue
		}
		m.endSetAside(terminal[m.deliveryID])
		r.deliveries++
		r.dups += m.dups
		if m.dups > maxDup {
			maxDup, worst = m.dups, m
		}
		states := terminal[m.deliveryID]
		switch {
		case len(states) == 0 && !w.model.heldBehindBlock(m):
			r.lost++
			r.note("lost: %s (%s, plan %v, %d bytes): no terminal result; %d POSTs", m.id, m.deliveryID, m.plan, m.size, m.posts)
		case len(states) > 1:
			if len(r.doubled) < simTrailDeliveries {
				r.doubled = append(r.doubled, m.deliveryID)
			}
			r.other++
			r.note("%s: %d terminal results %v", m.id, len(states), states)
		case len(states) == 1 && !m.ended.IsZero() && m.delivered != (states[0] == hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED) &&
			(m.ep.deletedAt.IsZero() || states[0] != hooklinev1.DeliveryState_DELIVERY_STATE_ENDPOINT_DELETED):
			// (An answer whose settlement a fault dropped may be
			// settled again after its endpoint was deleted: then its
			// one result is ENDPOINT_DELETED, which is right.)
			// A refusal injected into a commit may set a delivery aside
			// after its receiver said 2xx: the engine's right answer to
			// a record the broker refuses; counted only without them.
			if !injectedRefusals {
				r.other++
				r.note("%s: receiver ended it delivered=%v, result %v", m.id, m.delivered, states[0])
			}
		}
		if m.overBudget > 0 {
			r.other++
			r.note("%s: %d attempts numbered past its budget of %d", m.id, m.overBudget, m.ep.maxAttempts)
		}
		if m.early > 0 {
			r.other++
			r.note("%s: %d attempts before due", m.id, m.early)
		}
	}
	if n := countSetAside(w.members); n > 0 {
		t.Logf("seed %d: %d deliveries set aside by a dispatcher (a record refused or over the limit), taken as ended there", w.seed, n)
	}
	for _, b := range w.model.capBreach {
		r.other++
		r.note("cap: %s", b)
	}
	for _, id := range w.model.untransformed {
		r.other++
		r.note("%s: POSTed without its endpoint's transformation (no %s header)", id, simTransformHeader)
	}
	r.order = w.model.checkLanes(r)

	// Storm detectors (bounds derived in docs/DESIGN.md "Simulation").
	f := w.destructs
	r.aborts = w.aborts.Hits()
	if bound := 10 + 8*f; r.aborts > bound {
		r.storms++
		r.note("storm: %d aborted commits (%d committed) over %v, bound %d for %d destructive faults", r.aborts, w.commits.Hits(), w.phase, bound, f)
	}
	moves := w.movesOfWork()
	if bound := 2 + moves; maxDup > bound {
		r.storms++
		r.note("storm: one delivery POSTed %d times after its terminal try, bound %d for %d moves or drops of work: %s (%s, plan %v, %d POSTs, set aside %v, ended +%v)",
			maxDup, bound, moves, worst.id, worst.deliveryID, worst.plan, worst.posts, worst.setAside, worst.ended.Sub(w.model.t0).Round(time.Millisecond))
	}
	dupBound := w.dupBound(moves)
	t.Logf("seed %d: %d duplicate POSTs, bound %d (%d moves or drops of work, %d POSTs in flight at most, %.1f POSTs/s, %.1f to ordered endpoints)",
		w.seed, r.dups, dupBound, moves, w.model.peakInFlight, float64(w.model.posts)/w.phase.Seconds(), float64(w.model.orderedPosts)/w.phase.Seconds())
	if bound := dupBound; r.dups > bound {
		r.storms++
		r.note("storm: %d duplicate POSTs for %d deliveries, bound %d for %d moves or drops of work (graceful leaves and aborts Kafka caused allow none)", r.dups, r.deliveries, bound, moves)
	}
	written, byTopic := w.recordsWritten()
	if r.deliveries > 0 {
		r.records = float64(written) / float64(r.deliveries)
	}
	// A member held behind a blocked head waits parked while the block
	// lasts (nothing unblocks one here): its parked record, and a spill
	// hop (a retries and a deliveries record) if it waited in memory
	// when the head blocked. Until 2026-12-07 it went round the retry
	// path every recheck (1 s here), and this term was 3 records per
	// such member per second of the run.
	held := 0
	for _, m := range w.members {
		if m.accepted && m.ended.IsZero() && w.model.heldBehindBlock(m) {
			held++
		}
	}
	parks := 4 * held
	if bound := 12*r.deliveries + 400*(f+1) + parks; written > int64(bound) {
		r.storms++
		r.note("storm: %d Kafka records written for %d deliveries (%.1f each), bound %d (%d of it for the %d members parked behind blocked heads); by topic %v",
			written, r.deliveries, r.records, bound, parks, held, byTopic)
	}
	return r
}

// countSetAside counts the members whose set-aside was their end.
func countSetAside(ms []*simMember) int {
	n := 0
	for _, m := range ms {
		if m.setAside {
			n++
		}
	}
	return n
}

// endSetAside takes m's set-aside as its end when its one terminal
// result says FAILED: a refused record (an injected produce error, or
// one over the record limit) ends a delivery there, with no attempt,
// and its lane goes on (O1 holds its followers until then; the
// set-aside is decided before any of them can start), on a block
// endpoint too. Its end is the set-aside's unless a receiver ended it
// before (a 2xx or a 400 whose result was then refused). A set-aside
// whose records another owner replaced (it does not share the blame)
// is not an end. Model lock held.
func (m *simMember) endSetAside(states []hooklinev1.DeliveryState) {
	if m.setAsideAt.IsZero() || len(states) != 1 || states[0] != hooklinev1.DeliveryState_DELIVERY_STATE_FAILED {
		return
	}
	m.setAside = true
	if m.ended.IsZero() {
		m.ended, m.delivered = m.setAsideAt, false
	}
}

// checkLanes counts, in every ordered lane, the members whose first
// attempt started before an earlier member's terminal try returned (O1)
// and the members attempted behind a blocked head (O5).
func (sm *simModel) checkLanes(r *simReport) int {
	at := func(x time.Time) time.Duration { return x.Sub(sm.t0).Round(time.Millisecond) }
	bad := 0
	names := make([]string, 0, len(sm.lanes))
	for n := range sm.lanes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		var latest, open, blocked *simMember // the earlier member ended last; one never ended; the blocking head
		for _, m := range sm.lanes[name] {
			if !m.accepted {
				continue
			}
			switch {
			case m.started.IsZero():
			case blocked != nil:
				bad++
				r.note("O5: lane %s: %s attempted at +%v behind blocked head %s (ended +%v)", name, m.id, at(m.started), blocked.id, at(blocked.ended))
			case open != nil:
				bad++
				r.note("O1: lane %s: %s started +%v while %s (%s) never ended", name, m.id, at(m.started), open.id, open.deliveryID)
			case latest != nil && !m.started.After(latest.settledAt()):
				bad++
				r.note("O1: lane %s: %s started +%v before %s ended (+%v)", name, m.id, at(m.started), latest.id, at(latest.settledAt()))
			}
			switch {
			case m.blocks() && blocked == nil:
				blocked = m
			case m.ended.IsZero() && open == nil:
				open = m
			}
			if !m.ended.IsZero() && (latest == nil || m.settledAt().After(latest.settledAt())) {
				latest = m
			}
		}
	}
	return bad
}

// terminalStates reads the results topic to its end: each delivery's
// terminal results (delivered, failed, expired, blocked, endpoint
// deleted).
func (w *simWorld) terminalStates() map[string][]hooklinev1.DeliveryState {
	cl := w.st.reader(w.st.topics.Results)
	defer cl.Close()
	out := map[string][]hooklinev1.DeliveryState{}
	// A record fetched twice (the reader's position reset by a fetch
	// error, a leader move) is one record: counted once, by its place.
	// Two results of one delivery are two records at two offsets.
	type place struct {
		partition int32
		offset    int64
	}
	seen := map[place]bool{}
	// Quiet: the stack has settled; read until a poll finds nothing for 3 s.
	for {
		ctx, cancel := context.WithTimeout(w.t.Context(), 3*time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(rec *kgo.Record) {
			n++
			p := place{rec.Partition, rec.Offset}
			if seen[p] {
				w.t.Logf("seed %d: results[%d]@%d fetched twice by the checker; counted once", w.seed, rec.Partition, rec.Offset)
				return
			}
			seen[p] = true
			res := newResult()
			if err := proto.Unmarshal(rec.Value, res); err != nil {
				return
			}
			switch s := res.GetState(); s {
			case hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED, hooklinev1.DeliveryState_DELIVERY_STATE_FAILED,
				hooklinev1.DeliveryState_DELIVERY_STATE_EXPIRED, hooklinev1.DeliveryState_DELIVERY_STATE_BLOCKED,
				hooklinev1.DeliveryState_DELIVERY_STATE_ENDPOINT_DELETED:
				out[res.GetDeliveryId()] = append(out[res.GetDeliveryId()], s)
			}
		})
		if n == 0 || w.t.Context().Err() != nil {
			return out
		}
	}
}

// recordsWritten is every offset written to the run's topics (records
// and transaction markers, committed or aborted).
func (w *simWorld) recordsWritten() (int64, map[string]int64) {
	ctx := w.t.Context()
	topics, err := w.st.admin.ListTopics(ctx)
	if err != nil {
		return 0, nil
	}
	var names []string
	for _, n := range topics.Names() {
		if strings.HasPrefix(n, w.st.kafka.TopicPrefix) {
			names = append(names, n)
		}
	}
	ends, err := w.st.admin.ListEndOffsets(ctx, names...)
	if err != nil {
		return 0, nil
	}
	var sum int64
	by := map[string]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		sum += o.Offset
		by[strings.TrimPrefix(o.Topic, w.st.kafka.TopicPrefix)] += o.Offset
	})
	return sum, by
}

// simTable renders the reports as the table make sim prints.
func simTable(rs []*simReport) string {
	var b strings.Builder
	b.WriteString("| seed | faults injected | deliveries | lost | order violations | stalls | storms | duplicates | other | aborts | records/delivery | took |\n")
	b.WriteString("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	total := 0
	for _, r := range rs {
		var kinds []string
		for k, n := range r.faults {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
		}
		sort.Strings(kinds)
		fmt.Fprintf(&b, "| %d | %s | %d | %d | %d | %d | %d | %d | %d | %d | %.1f | %v |\n", r.seed, strings.Join(kinds, ", "), r.deliveries,
			r.lost, r.order, r.stalls, r.storms, r.dups, r.other, r.aborts, r.records, r.took.Round(time.Second))
		total += r.violations()
	}
	if total > 0 {
		var failing []string
		for _, r := range rs {
			if r.violations() > 0 {
				failing = append(failing, fmt.Sprint(r.seed))
			}
		}
		fmt.Fprintf(&b, "\n%d violations; rerun: make sim SEEDS=%s\n", total, strings.Join(failing, ","))
	} else {
		b.WriteString("\nno violations\n")
	}
	return b.String()
}

// Duplicate POSTs (docs/DESIGN.md, "What a crash, a rebalance or an
// outage re-POSTs", and "Simulation"). A graceful leave re-POSTs
// nothing (it drains, spills what waits in its lanes and commits), nor
// does a commit Kafka aborted (the work of the partitions kept is kept),
// nor a stalled fetch or produce (no attempt starts while a commit
// cannot land), nor a scheduler crash (its hops are transactional).
// The faults that move or drop work — a dispatcher crash or pause (its
// partitions are taken over), a join or a forced rebalance (a revoke
// cancels the moved partitions' attempts and the next commit aborts), a
// refused record or a transaction error (the window is dropped, or the
// session ends) — re-POST at most what was in flight plus what
// completed without being committed:
//
//	in flight: the most POSTs the receivers saw at once;
//	completed since the last commit: R × (commit interval + commitStall);
//	completed above a watermark but not committed there: the ordered
//	  endpoints' settlements that change their lane (they wait for the
//	  watermark), R_ordered × G,
//
// R the rate of POSTs over the fault phase and R_ordered that of the
// ordered endpoints, commitStall (1 s) the longest a commit runs before
// attempts stop, and G how long a watermark can stand still behind a
// delivery not done: its attempt timeout (1 s here), then --stuck-after
// and one relief tick before its lane is spilled.
const (
	simCommitStall  = time.Second            // the dispatcher's commitStall
	simReliefTick   = 250 * time.Millisecond // the dispatcher's reliefTick
	simEndpointWait = time.Second            // every endpoint's attempt timeout
)

// movesOfWork counts the injected moves or drops of a dispatcher's
// work: each crash, pause, join and forced rebalance, each freeze at an
// automatic pause (beyond the session: its partitions move, as a
// pause's do), each pause that thaws into a rebalance (the expelled
// member's session ends and a new one takes partitions again), and each
// request a
// produce-err or txn-err fault refuses (a fault that refuses two
// produces aborts two commits, each dropping the window once).
func (w *simWorld) movesOfWork() int {
	n := w.refusals
	for _, kind := range []string{"dispatcher-crash", "dispatcher-pause", "pause-then-freeze", "pause-then-rejoin", "dispatcher-join", "rebalance"} {
		n += w.counts[kind]
	}
	return n
}

// dupBound is the duplicate POSTs moves faults may cause, plus 5 for
// the rounding of a rate measured over the whole phase.
func (w *simWorld) dupBound(moves int) int {
	if moves == 0 {
		return 0
	}
	rate := float64(w.model.posts) / w.phase.Seconds()
	ordered := float64(w.model.orderedPosts) / w.phase.Seconds()
	interval := (w.dc.CommitInterval + simCommitStall).Seconds()
	gap := (simEndpointWait + w.dc.StuckAfter + simReliefTick).Seconds()
	return moves*(w.model.peakInFlight+int(math.Ceil(rate*interval))+int(math.Ceil(ordered*gap))) + 5
}
