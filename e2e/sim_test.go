package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/services/dispatcher/dispatcher"
	"github.com/hookline/hookline/services/ingest/ingest"
	"github.com/hookline/hookline/services/scheduler/scheduler"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/types/known/durationpb"
)

// make sim: a seeded fault simulation of the real services (issue 23;
// docs/DESIGN.md "Simulation", docs/reliability.md). Each seed draws a
// world (endpoints, their receivers' behaviour per try, payload sizes,
// ordered lanes per endpoint and per key with block and skip heads), a
// publish timeline and a fault schedule (sim_faults_test.go), runs
// ingest, up to three dispatchers and the scheduler in this process on a
// three-broker kfake, and after the faults stop and a quiet period
// checks the model (sim_check_test.go).
const (
	envSim         = "HOOKLINE_SIM"               // 1: run TestSim (make sim sets it)
	envSimSeeds    = "HOOKLINE_SIM_SEEDS"         // a count (seeds 1..n) or a comma-separated list
	envSimDuration = "HOOKLINE_SIM_DURATION"      // the fault phase of each seed (default 12s)
	envSimSlowest  = "HOOKLINE_SIM_TRAIL_SLOWEST" // n: trail the n deliveries that ended last, stalled or not
)

// simDefaultSeeds is what make sim and make test run. Each found a
// defect once (docs/reliability.md, "Simulation", names which); a
// finding made deterministic is a regression case in sim_regress_test.go
// (seed 5: TestSimTakesALaneMemberSetAsideByARefusedLanesRecordAsEnded;
// seed 12, found by make sim SEEDS=1..16:
// TestSimAMemberTheSchedulerSetsAsideReleasesItsLane; seed 11, found by
// make sim SEEDS=7..15 after the parked topic: 41 retries stalled when
// the restarted scheduler's sync-marker produce hung unbounded behind a
// stalled produce; seed 5 also found the parked head an ordered lane
// forgot; seed 10 finds issue 24 item 3, a probe set aside as
// unwritable that never ended, when scripts/reverts/ puts it back:
// its big-event burst puts an endpoint in outage mode while a broker
// refuses big records; seed 59 finds issue 24 item 6, the scheduler's
// abort loop behind a refused release, put back the same way: 661
// aborted commits against a bound of 106; seeds 4 and 6 draw the
// automatic-pause world, where seed 6 found the three auto-pause defects
// of 2026-12-06). Seed 3 left the list when the worlds grew (the clean
// clone's make test ran these ten in 6 m 35 s, seed 3 alone 2 m 7 s,
// over the 5 minutes): its finding, the clock-skew hop loop, is
// TestClockSkewBetweenSchedulerAndDispatcherNeitherLoopsNorFiresEarly.
var simDefaultSeeds = []uint64{1, 2, 4, 5, 6, 10, 11, 12, 59}

const (
	simSession = 6 * time.Second // the dispatchers' and scheduler's session timeout (kfake's minimum)
	// simLiveness bounds how long after the faults stop every delivery
	// that can end must have ended: the session timeout (an owner that
	// died), the longest retry schedule of the world (5 attempts, each at
	// most 1 s timeout + 1 s Retry-After), outage probes (1 s), and the
	// park recheck, with room for a loaded machine.
	simLiveness = 45 * time.Second
	// simLaneLiveness bounds the whole liveness wait: ordered lanes that
	// keep ending members may take longer than simLiveness to drain,
	// never longer than this.
	simLaneLiveness = 3 * time.Minute
)

// simSeeds parses HOOKLINE_SIM_SEEDS: one seed ("1234"), a list
// ("1,5,9"), a range ("1..50": a count of seeds from 1), or any mix.
func simSeeds(t *testing.T) []uint64 {
	v := os.Getenv(envSimSeeds)
	if v == "" {
		return simDefaultSeeds
	}
	var out []uint64
	for f := range strings.SplitSeq(v, ",") {
		f = strings.TrimSpace(f)
		lo, hi, isRange := strings.Cut(f, "..")
		a, err := strconv.ParseUint(lo, 10, 64)
		b := a
		if err == nil && isRange {
			b, err = strconv.ParseUint(hi, 10, 64)
		}
		if err != nil || b < a || b-a > 100000 {
			t.Fatalf("%s=%q: want seeds like 1234, 1,5,9 or 1..50", envSimSeeds, v)
		}
		for s := a; s <= b; s++ {
			out = append(out, s)
		}
	}
	return out
}

// TestSim runs every seed of HOOKLINE_SIM_SEEDS, prints the table and
// fails on any violation, naming the command that reruns the seed.
func TestSim(t *testing.T) {
	if os.Getenv(envSim) == "" {
		t.Skip("the fault simulation runs under make sim (HOOKLINE_SIM=1)")
	}
	if v := os.Getenv(envKafka); v != "" && v != "kfake" {
		t.Skip("the fault simulation runs on kfake only")
	}
	phase := 12 * time.Second
	if v := os.Getenv(envSimDuration); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s: %v", envSimDuration, err)
		}
		phase = d
	}
	var reports []*simReport
	for _, seed := range simSeeds(t) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			defer simWatchdog(seed, phase)()
			r := runSim(t, seed, phase)
			reports = append(reports, r)
			if r.violations() > 0 {
				t.Errorf("seed %d: %s\nrerun: make sim SEEDS=%d DURATION=%v", seed, strings.Join(r.notes, "; "), seed, phase)
			}
		})
	}
	table := simTable(reports)
	fmt.Print(table)
	_ = os.MkdirAll(filepath.Join("..", "bin", "sim"), 0o755)
	_ = os.WriteFile(filepath.Join("..", "bin", "sim", "results.md"), []byte(table), 0o644)
}

// simWatchdog bounds one seed's run: a seed that has not finished after
// its fault phase plus 8 minutes (the slowest seed here takes under 3)
// is a hang — of the engine, which the checker's bounded waits should
// have reported, or of the harness — so every goroutine's stack goes to
// bin/sim/seed-N-hang.txt and the process panics naming it, rather than
// sitting idle until go test's 60-minute timeout. It returns the stop
// of the watch.
func simWatchdog(seed uint64, phase time.Duration) func() {
	limit := phase + 8*time.Minute
	tm := time.AfterFunc(limit, func() {
		path := filepath.Join("..", "bin", "sim", fmt.Sprintf("seed-%d-hang.txt", seed))
		_ = os.MkdirAll(filepath.Dir(path), 0o755)
		if f, err := os.Create(path); err == nil {
			_ = pprof.Lookup("goroutine").WriteTo(f, 2)
			_ = f.Close()
		}
		panic(fmt.Sprintf("make sim: seed %d did not finish within %v; every goroutine's stack is in bin/sim/seed-%d-hang.txt (rerun: make sim SEEDS=%d)", seed, limit, seed, seed))
	})
	return func() { tm.Stop() }
}

// simWorld is one seed's running system and model.
type simWorld struct {
	t       *testing.T
	memory  simMemory // the memory checker's samples (sim_memory_test.go)
	seed    uint64
	phase   time.Duration
	st      *stack
	c       *kfake.Cluster
	model   *simModel
	eps     []*simEndpoint
	drawn   int          // how many of eps drawWorld drew (the others: later worlds')
	burstEp *simEndpoint // the refusal window's big burst's endpoint, if any
	members []*simMember
	dc      dispatcher.Config
	sc      scheduler.Config
	srvURL  string

	skewSlot int // 0: none; 1..3 a dispatcher; 4 the scheduler
	// autoResume draws how long the operator waits before resuming an
	// endpoint Hookline paused (nil: the seed draws no automatic pauses;
	// sim_autopause_test.go).
	autoResume func() time.Duration
	skew       time.Duration
	// pauseFreezes is how many automatic pauses may still freeze the
	// dispatcher that decides them, for pauseFreezeFor
	// (sim_autopause_test.go); faulting is true during the fault phase.
	pauseFreezes   atomic.Int32
	pauseFreezeFor time.Duration
	// slowAllowFor, when set, holds each dispatcher's loop that long
	// after it allowed a callback that revokes nothing, in the fault
	// phase (sim_slowallow_test.go).
	slowAllowFor time.Duration
	// refusing is the auto-pause world's refusing endpoint;
	// thresholdAborts how many of its threshold attempts may still stall
	// and refuse their dispatcher's commit (sim_autopause_test.go).
	refusing        *simEndpoint
	thresholdAborts atomic.Int32
	faulting        atomic.Bool
	// onAttempt, when set, runs at each attempt's start on the slot that
	// makes it (a regression case's trigger: sim_regress_test.go).
	onAttempt func(s *simSlot)
	// rejoinRng draws which freezes thaw into a rebalance, and
	// schedFreeze is the scheduler's Kafka links (sim_expelled_test.go).
	rejoinRng   *rand.Rand
	schedFreeze *kafkaFreeze

	mu        sync.Mutex // guards the process pool and the counts
	slots     [3]*simSlot
	sched     simProc
	schedUp   bool
	counts    map[string]int // faults injected, by kind
	handles   []*kfake.FaultHandle
	aborts    *kfake.FaultHandle
	commits   *kfake.FaultHandle
	destructs int // faults that may abort a commit or move an owner
	// refusals are the requests the produce-err and txn-err faults
	// refuse (a fault refuses 1-3): each drops a window once, so each is
	// one move of work for the duplicates bounds (movesOfWork).
	refusals int
}

// simSlot is one dispatcher's place in the pool: its transactional id
// stays with the slot across restarts (a restarted process fences its
// predecessor).
type simSlot struct {
	n       int
	svc     simProc
	up      bool
	freeze  *kafkaFreeze
	started int

	dmu  sync.Mutex
	disp *dispatcher.Service // the running process's service, for its memory report
}

// dispatcher returns the slot's last started service.
func (s *simSlot) dispatcher() *dispatcher.Service {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	return s.disp
}

func (w *simWorld) count(kind string, destructive bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.counts[kind]++
	if destructive {
		w.destructs++
	}
}

// refused counts the n requests a produce-err or txn-err fault refuses.
func (w *simWorld) refused(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.refusals += n
}

func (w *simWorld) clock(slot int) func() time.Time {
	if slot == w.skewSlot {
		skew := w.skew
		return func() time.Time { return time.Now().Add(skew) }
	}
	return time.Now
}

// startDispatcher starts slot s (w.mu held).
func (w *simWorld) startDispatcher(s *simSlot) {
	c := w.dc
	c.TransactionalID = fmt.Sprintf("%sdispatcher-%d", w.st.kafka.TopicPrefix, s.n)
	if c.AnswersDir != "" {
		c.AnswersDir = filepath.Join(c.AnswersDir, fmt.Sprint(s.n)) // one journal per slot, kept across its restarts
	}
	if c.GroupInstanceID != "" {
		c.GroupInstanceID = fmt.Sprint(c.GroupInstanceID, s.n) // one static member per slot, kept across its restarts
	}
	c.Kafka.ClientOpts = append(slices.Clip(c.Kafka.ClientOpts), kgo.Dialer(s.freeze.dial))
	s.started++
	now := w.clock(s.n)
	name := fmt.Sprint("dispatcher-", s.n)
	c.Kafka.ClientID = simClientID(name)
	s.svc.start(w, name, func() (func(context.Context) error, error) {
		d, err := dispatcher.New(c, dispatcher.WithLogger(w.dispatcherLogger(s, name)),
			dispatcher.WithBeforeAttempt(w.beforeAttempt(s, now)), dispatcher.WithSetAside(w.model.setAside), dispatcher.WithClock(now), dispatcher.WithRandSeed(w.seed+uint64(s.n)))
		if err != nil {
			return nil, err
		}
		s.dmu.Lock()
		s.disp = d
		s.dmu.Unlock()
		return d.Run, nil
	})
	s.up = true
}

func (w *simWorld) startScheduler() {
	c := w.sc
	c.Kafka.ClientID = simClientID("scheduler")
	c.Kafka.ClientOpts = append(slices.Clip(c.Kafka.ClientOpts), kgo.Dialer(w.schedFreeze.dial))
	w.sched.start(w, "scheduler", func() (func(context.Context) error, error) {
		s, err := scheduler.New(c, scheduler.WithLogger(testLogger(w.t, "scheduler")), scheduler.WithClock(w.clock(4)), scheduler.WithSetAside(w.model.setAside))
		if err != nil {
			return nil, err
		}
		return s.Run, nil
	})
	w.schedUp = true
}

// simProc runs one process of the simulation as an orchestrator would:
// a run that returns (the process exits, for instance fenced) is counted
// and started again after 500 ms, until halt. Safe for concurrent use.
type simProc struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

func (p *simProc) start(w *simWorld, name string, mk func() (func(context.Context) error, error)) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	p.mu.Lock()
	p.cancel, p.done = cancel, done
	p.mu.Unlock()
	go func() {
		defer close(done)
		for {
			run, err := mk()
			if err == nil {
				err = run(ctx)
			}
			if ctx.Err() != nil {
				return
			}
			w.t.Logf("%s exited (%v); restarted in 500ms", name, err)
			w.count("exit "+name, false)
			if !sleepUntil(ctx, time.Now().Add(500*time.Millisecond)) {
				return
			}
		}
	}()
}

// halt stops the process and waits until it has returned.
func (p *simProc) halt() {
	p.mu.Lock()
	cancel, done := p.cancel, p.done
	p.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

func runSim(t *testing.T, seed uint64, phase time.Duration) *simReport {
	began := time.Now()
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	w := newSimWorld(t, seed, phase, 3)
	w.drawWorld(rng)
	w.drawMemory(seed)
	w.drawQueue(seed)
	w.drawJournal(seed)
	w.drawStatic(seed)
	w.drawSlowAllow(seed)
	sched := append(append(w.drawSchedule(rng), w.drawRefusals(seed)...), w.drawGroupLost(seed)...)
	sched = append(sched, w.drawSchedulerPause(seed)...)
	// Endpoints created and deleted mid-run come last: the draws above
	// pick among the endpoints every seed had before them.
	w.drawAutoPause(seed)
	sched = append(sched, w.drawLifecycle(seed)...)
	w.drawContent(seed)
	w.placeMembers()
	if w.skewSlot != 0 {
		t.Logf("seed %d: the clock of %s is %v off", seed, map[int]string{1: "dispatcher-1", 2: "dispatcher-2", 3: "dispatcher-3", 4: "the scheduler"}[w.skewSlot], w.skew)
	}
	w.serve()
	w.mu.Lock()
	w.startDispatcher(w.slots[0])
	w.startDispatcher(w.slots[1])
	w.startScheduler()
	w.mu.Unlock()
	w.model.ownershipMayChange(simSession + 5*time.Second)

	// The fault phase: publish on the timeline while the schedule runs.
	t0 := time.Now()
	w.faulting.Store(true)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { w.publishAll(ctx, t0) })
	mctx, endMemory := context.WithCancel(t.Context())
	var mwg sync.WaitGroup
	mwg.Go(func() { w.sampleMemory(mctx) })
	mwg.Go(func() { w.watchPauses(mctx) })
	for _, f := range sched {
		wg.Go(func() {
			if !sleepUntil(ctx, t0.Add(f.at)) {
				return
			}
			f.apply(ctx, w)
		})
	}
	sleepUntil(t.Context(), t0.Add(phase))
	w.faulting.Store(false)
	cancel()
	wg.Wait()
	w.heal()
	t.Logf("seed %d: faults stopped at +%v; %v", seed, time.Since(t0).Round(time.Millisecond), w.counts)

	r := w.check()
	endMemory()
	mwg.Wait()
	w.checkAutoPause(r)
	w.checkMemory(r)
	r.took = time.Since(began)
	if r.stalls > 0 || r.lost > 0 {
		w.dumpStalled(r.stalled)
	} else if len(r.doubled) > 0 {
		w.dumpStalled(r.doubled) // where each of its results came from
	} else if n, _ := strconv.Atoi(os.Getenv(envSimSlowest)); n > 0 {
		w.trailSlowest(n)
	}
	return r
}

// dumpStalled writes, while the stalled world still runs, what decides
// where a stall sits (docs/reliability.md, seed 6's stall): every
// goroutine's stack, and each deliveries and retries partition's high
// watermark beside its last stable offset (an open transaction holds
// read_committed consumers at the second), every transaction the
// coordinators know (which one holds it), each live dispatcher's account
// of its lanes (dispatcher.Service.DumpState), and the trail of the first
// stalled deliveries (every committed record naming them: trail), to
// bin/sim/seed-N-stall.txt.
func (w *simWorld) dumpStalled(stalled []string) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "seed %d: stalled world at %v\n\n", w.seed, time.Now().UTC().Format(time.RFC3339Nano))
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.t.Context()), 10*time.Second)
	defer cancel()
	topics := []string{w.st.topics.Deliveries, w.st.topics.Retries}
	high, herr := w.st.admin.ListEndOffsets(ctx, topics...)
	stable, serr := w.st.admin.ListCommittedOffsets(ctx, topics...)
	fmt.Fprintf(&b, "end offsets (errors: %v, %v)\n", herr, serr)
	high.Each(func(o kadm.ListedOffset) {
		lso, _ := stable.Lookup(o.Topic, o.Partition)
		fmt.Fprintf(&b, "  %s[%d]: high watermark %d, last stable offset %d%s\n", o.Topic, o.Partition, o.Offset, lso.Offset,
			map[bool]string{true: "  <- held by an open transaction", false: ""}[lso.Offset < o.Offset])
	})
	committed, cerr := w.st.admin.FetchOffsets(ctx, w.dc.Group)
	fmt.Fprintf(&b, "\ngroup %s committed offsets (error: %v)\n", w.dc.Group, cerr)
	committed.Each(func(o kadm.OffsetResponse) {
		fmt.Fprintf(&b, "  %s[%d]: %d (metadata %d bytes)\n", o.Topic, o.Partition, o.At, len(o.Metadata))
	})
	txns, terr := w.st.admin.DescribeTransactions(ctx)
	fmt.Fprintf(&b, "\ntransactions (error: %v)\n", terr)
	for _, d := range txns.Sorted() {
		fmt.Fprintf(&b, "  %s: %s, producer %d epoch %d, started %v ago, partitions %v, err %v\n", d.TxnID, d.State, d.ProducerID, d.ProducerEpoch,
			time.Since(time.UnixMilli(d.StartTimestamp)).Round(time.Millisecond), d.Topics.Sorted(), d.Err)
	}
	for _, group := range []string{w.dc.Group, w.sc.Group} {
		gs, gerr := w.st.admin.DescribeGroups(ctx, group)
		g := gs[group]
		fmt.Fprintf(&b, "\ngroup %s: state %s, %d members (error: %v, %v)\n", group, g.State, len(g.Members), gerr, g.Err)
		for _, m := range g.Members {
			if c, ok := m.Assigned.AsConsumer(); ok {
				fmt.Fprintf(&b, "  %s (%s): assigned %v\n", m.ClientID, m.MemberID, c.Topics)
			}
		}
	}
	for _, s := range w.liveSlots() {
		d := s.dispatcher()
		if d == nil {
			continue
		}
		dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
		state, err := d.DumpState(dctx)
		dcancel()
		fmt.Fprintf(&b, "\ndispatcher-%d's lanes (error: %v):\n%s", s.n, err, state)
	}
	w.trail(ctx, &b, stalled)
	// The part above goes to the test's log too (make sim prints it):
	// CI keeps the output, not bin/sim.
	w.t.Logf("seed %d: stalled world:\n%s", w.seed, b.String())
	b.WriteString("\ngoroutines:\n")
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	name := filepath.Join("..", "bin", "sim", fmt.Sprintf("seed-%d-stall.txt", w.seed))
	if err := os.WriteFile(name, b.Bytes(), 0o644); err != nil {
		w.t.Logf("seed %d: stall dump: %v", w.seed, err)
		return
	}
	w.t.Logf("seed %d: stall dump (goroutines, high watermarks and last stable offsets) in bin/sim/seed-%d-stall.txt", w.seed, w.seed)
}

// liveSlots are the dispatcher slots whose dispatcher runs now.
func (w *simWorld) liveSlots() []*simSlot {
	w.mu.Lock()
	defer w.mu.Unlock()
	var live []*simSlot
	for _, s := range w.slots {
		if s.up {
			live = append(live, s)
		}
	}
	return live
}

// newSimWorld starts a kfake cluster of brokers nodes and the stack on
// it (ingest; the stack's own dispatcher and scheduler give way to the
// simulation's, which start*/serve start), with the storm detectors'
// counters. The world (endpoints, members) is the caller's to draw.
func newSimWorld(t *testing.T, seed uint64, phase time.Duration, brokers int) *simWorld {
	c, err := kfake.NewCluster(kfake.NumBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	w := &simWorld{t: t, seed: seed, phase: phase, c: c, model: newSimModel(), counts: map[string]int{}}
	var dcp *dispatcher.Config
	var scp *scheduler.Config
	var kcp *hkafka.Config
	w.st = startStack(t, func(sc *stackConfig) {
		sc.kafka.Brokers = c.ListenAddrs()
		dcp, scp, kcp = sc.dispatcher, sc.scheduler, sc.kafka
		sc.dispatcher.MaxFaults = simMaxFaults
		sc.dispatcher.SessionTimeout = simSession
		sc.scheduler.SessionTimeout = simSession
		sc.dispatcher.DrainTimeout = 3 * time.Second
		sc.dispatcher.ParkRecheck = 500 * time.Millisecond
		sc.dispatcher.OutageRecheck = 500 * time.Millisecond
		sc.dispatcher.OutageProbeMax = time.Second
		sc.dispatcher.StuckAfter = 2 * time.Second
		sc.dispatcher.RateLimit = 0
	})
	// The stack's own dispatcher and scheduler give way to the
	// simulation's, whose clocks, hooks and Kafka links it controls.
	w.st.dispatcher.halt()
	w.st.scheduler.halt()
	w.dc, w.sc = *dcp, *scp
	w.dc.Kafka, w.sc.Kafka = *kcp, *kcp
	// Groups of their own: a member the stack's services left behind
	// (halted mid-join, before they knew their member ID) cannot then
	// hold the simulation's first rebalance until its timeout.
	w.dc.Group += "-sim"
	w.sc.Group += "-sim"
	w.sc.TransactionalID = kcp.TopicPrefix + "scheduler-1"

	// Counters of the storm detectors: every commit and abort any
	// transactional producer ends.
	w.aborts = c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Observe: true, Count: -1, When: func(r kmsg.Request) bool {
		e, ok := r.(*kmsg.EndTxnRequest)
		return ok && !e.Commit && !strings.HasSuffix(e.TransactionalID, simEpochTxn)
	}})
	w.commits = c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Observe: true, Count: -1, When: func(r kmsg.Request) bool {
		e, ok := r.(*kmsg.EndTxnRequest)
		return ok && e.Commit
	}})
	for i := range w.slots {
		w.slots[i] = &simSlot{n: i + 1, freeze: newKafkaFreeze()}
	}
	w.schedFreeze = newKafkaFreeze()
	return w
}

// serve starts the receivers of the world's endpoints and creates the
// endpoints; the processes started from now on stop before the
// receivers close.
func (w *simWorld) serve() {
	t := w.t
	srv := httptest.NewServer(w.model)
	t.Cleanup(srv.Close)
	t.Cleanup(w.stopAll) // before the receivers close
	w.srvURL = srv.URL
	for _, ep := range w.eps {
		if ep.created != nil {
			continue // created mid-run (sim_lifecycle_test.go)
		}
		if err := w.createEndpoint(ep); err != nil {
			t.Fatal(err)
		}
	}
}

// createEndpoint creates ep at its receiver's path.
func (w *simWorld) createEndpoint(ep *simEndpoint) error {
	req := &hooklinev1.CreateEndpointRequest{
		Url: w.srvURL + "/" + ep.name, Ordering: ep.ordering, MaxInFlight: ep.maxInFlight,
		RetryPolicy: ladderPolicy(ep.maxAttempts, 100*time.Millisecond, 300*time.Millisecond),
		Timeout:     durationpb.New(simAttemptTimeout),
	}
	// Every endpoint but a filtering one takes sim.event, which only
	// reaches it by name (named endpoints skip both filters); the
	// filtering one takes sim.content, published to no name, so its
	// content filter decides (sim_content_test.go).
	req.EventTypes = []string{"sim.event"}
	if ep.filter != "" {
		req.EventTypes = []string{simContentType}
	}
	req.Filter, req.Transformation = ep.filter, ep.transform
	if ep.batch > 0 {
		req.Batch = &hooklinev1.BatchSettings{MaxEvents: ep.batch, MaxWait: durationpb.New(ep.batchWait)}
	}
	if ep.ordered() {
		req.OnHeadFailure = hooklinev1.HeadFailure_HEAD_FAILURE_SKIP
		if ep.block {
			req.OnHeadFailure = hooklinev1.HeadFailure_HEAD_FAILURE_BLOCK
		}
	}
	resp, err := w.st.endpoints().CreateEndpoint(w.st.ctx(), req)
	if err != nil {
		return fmt.Errorf("create %s: %w", ep.name, err)
	}
	w.model.mu.Lock()
	ep.id = resp.GetEndpoint().GetId()
	w.model.mu.Unlock()
	w.t.Logf("seed %d: endpoint %s is %s (%v, block %v, cap %d, batch %d within %v)", w.seed, ep.name, ep.id, ep.ordering, ep.block, ep.maxInFlight, ep.batch, ep.batchWait)
	return nil
}

// sleepUntil waits for the schedule's next point; false when ctx ended.
func sleepUntil(ctx context.Context, at time.Time) bool {
	tm := time.NewTimer(time.Until(at))
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// heal ends every fault: removes injected ones, thaws frozen links,
// restarts the scheduler and at least one dispatcher, resumes endpoints.
func (w *simWorld) heal() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range w.handles {
		h.Remove()
	}
	w.handles = nil
	up := 0
	for _, s := range w.slots {
		s.freeze.thaw()
		if s.up {
			up++
		}
	}
	if up == 0 {
		w.startDispatcher(w.slots[0])
	}
	if !w.schedUp {
		w.startScheduler()
	}
	for _, ep := range w.eps {
		_, _ = w.st.endpoints().ResumeEndpoint(w.st.ctx(), &hooklinev1.ResumeEndpointRequest{Id: ep.id})
	}
}

func (w *simWorld) stopAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.slots {
		s.freeze.thaw()
		s.svc.halt()
	}
	w.schedFreeze.thaw()
	w.sched.halt()
}

// drawWorld draws the endpoints and every delivery's plan, size, lane
// and publish offset.
func (w *simWorld) drawWorld(rng *rand.Rand) {
	n := 5 + rng.IntN(3)
	for i := range n {
		ep := &simEndpoint{name: fmt.Sprint("ep", i), maxAttempts: uint32(3 + rng.IntN(3))}
		switch rng.IntN(5) {
		case 0, 1:
			ep.ordering = hooklinev1.Ordering_ORDERING_UNORDERED
			ep.maxInFlight = []uint32{2, 4, 10}[rng.IntN(3)]
		case 2:
			ep.ordering = hooklinev1.Ordering_ORDERING_PER_ENDPOINT
		default:
			ep.ordering = hooklinev1.Ordering_ORDERING_PER_KEY
			ep.keys = 2 + rng.IntN(10)
			ep.maxInFlight = []uint32{2, 4, 10}[rng.IntN(3)]
		}
		ep.block = ep.ordered() && rng.IntN(2) == 0
		w.eps = append(w.eps, ep)
	}
	w.drawBatching()
	limit := defaults[ingest.Config](w.t).MaxPayloadBytes
	events := 150 + rng.IntN(100)
	for range events {
		ep := w.eps[rng.IntN(len(w.eps))]
		m := &simMember{ep: ep, size: drawSize(rng, limit), at: time.Duration(rng.Int64N(int64(w.phase * 7 / 10)))}
		if ep.ordering == hooklinev1.Ordering_ORDERING_PER_KEY {
			if k := rng.IntN(ep.keys + 1); k > 0 {
				m.key = fmt.Sprint("k", k)
			}
		}
		m.plan = drawPlan(rng, ep.maxAttempts, m.size)
		w.members = append(w.members, m)
	}
	w.drawn = len(w.eps)
	w.sortMembers()
}

// sortMembers orders w.members by publish offset (stable: a lane's
// members drawn in order stay in order).
func (w *simWorld) sortMembers() {
	sort.SliceStable(w.members, func(i, j int) bool { return w.members[i].at < w.members[j].at })
}

// placeMembers numbers w.members (sorted by publish offset) in their
// lanes and enters them in the model.
func (w *simWorld) placeMembers() {
	sizes := map[string]int{}
	for _, m := range w.members {
		lane := m.ep.name + "/" + m.key
		if m.ep.ordering == hooklinev1.Ordering_ORDERING_PER_ENDPOINT {
			lane = m.ep.name
		}
		m.i = sizes[lane]
		sizes[lane]++
		m.id = fmt.Sprint(lane, "#", m.i)
		if m.ep.ordered() {
			m.lane = lane
			w.model.lanes[lane] = append(w.model.lanes[lane], m)
		}
		w.model.members[m.id] = m
	}
}

// publishAll publishes every member at its offset, each lane (and each
// unordered endpoint) from one publisher goroutine of four, so a lane's
// publish order is the order its publishes returned.
func (w *simWorld) publishAll(ctx context.Context, t0 time.Time) {
	const publishers = 4
	by := make([][]*simMember, publishers)
	for _, m := range w.members {
		lane := m.lane
		if lane == "" {
			lane = m.id
		}
		p := fnv32(lane) % publishers
		by[p] = append(by[p], m)
	}
	var wg sync.WaitGroup
	for _, ms := range by {
		wg.Go(func() {
			for _, m := range ms {
				if !sleepUntil(ctx, t0.Add(m.at)) || !m.ep.awaitCreated(ctx) {
					return
				}
				pctx, cancel := context.WithTimeout(w.st.ctx(), 10*time.Second)
				req := &hooklinev1.PublishEventRequest{EventType: "sim.event", Payload: m.payload(), OrderingKey: m.key, EndpointIds: []string{m.ep.id}}
				if m.ep.filter != "" {
					req.EventType, req.EndpointIds = simContentType, nil // its filter decides
				}
				resp, err := w.st.events().PublishEvent(pctx, req)
				cancel()
				if err == nil && m.filtered && len(resp.GetDeliveries()) != 0 {
					w.t.Errorf("seed %d: %s's event is one its endpoint's filter refuses, but PublishEvent wrote %d deliveries", w.seed, m.id, len(resp.GetDeliveries()))
				}
				w.model.mu.Lock()
				m.published = true
				if err == nil && len(resp.GetDeliveries()) == 1 {
					m.accepted = true
					m.deliveryID = resp.GetDeliveries()[0].GetDeliveryId()
					w.model.byDelivery[m.deliveryID] = m
				}
				w.model.mu.Unlock()
				if err != nil {
					w.t.Logf("publish %s (%d bytes): %v", m.id, m.size, err)
				} else if m.lane != "" {
					w.t.Logf("published %s as %s (plan %v)", m.id, m.deliveryID, m.plan)
				}
			}
		})
	}
	wg.Wait()
}
