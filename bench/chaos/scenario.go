package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hookline/hookline/bench/harness"
)

// scenario is one chaos run: a fault injected while the load runs.
// nodes is the broker count it needs (0: any).
type scenario struct {
	name, doc string
	nodes     int
	dev       bool // runs on one `hookline dev` instead of the services on Kafka
	fault     func(ctx context.Context, e *env) (string, error)
	shape     func(cfg config) loadShape // nil: the steady mixed load (defaultShape)
}

// loadShape is what a scenario publishes and to which receivers.
type loadShape struct {
	rate      int // events per second; 0: as fast as answers come (closed loop)
	inflight  int // publishes in flight at most
	maxEvents int // published at most (0: until --load ends)
	pad       int // payload bytes added to each event
	mix       func(seq int64) string
	// slowEndpoints endpoints share the slow receiver (default 1), each
	// with at most slowInFlight attempts in flight (0: the default).
	slowEndpoints int
	slowInFlight  uint32
	relaxAfter    bool     // the slow receiver answers at once after the load
	bad           bool     // start the misbehaving receivers (kindBad)
	ordered       bool     // publish the ordered lanes too (runOrdered)
	ingestArgs    []string // extra flags of every ingest
	dispatchArgs  []string // extra flags of every dispatcher
}

// defaultShape is the steady load of the crash scenarios: --rate events
// per second over the mixed receivers, at most 64 publishes in flight,
// and beside them the ordered lanes (ordered.go).
func defaultShape(cfg config) loadShape {
	return loadShape{rate: cfg.Rate, inflight: 64, mix: kindOf, ordered: true}
}

// overloadPad is the payload size of the overload scenario's events.
const overloadPad = 16 << 10

// overloadShape publishes --overload-events events of 16 KiB in a
// closed loop of 512 publishes, as fast as ingest answers, to a receiver
// that takes about 25 a second while the load lasts (8 endpoints, one
// attempt in flight each, 300 ms per request) and answers at once after
// it, so the backlog drains. Ingest's --max-in-flight-bytes is 4 MiB and
// each dispatcher's --window-bytes 8 MiB, so both bounds are reached even
// when Kafka is slow and few events get in.
func overloadShape(cfg config) loadShape {
	return loadShape{
		inflight: 512, maxEvents: cfg.OverloadEvents, pad: overloadPad,
		mix:           func(int64) string { return kindSlow },
		slowEndpoints: 8, slowInFlight: 1, relaxAfter: true,
		ingestArgs:   []string{"--max-in-flight-bytes", strconv.Itoa(4 << 20)},
		dispatchArgs: []string{"--window-bytes", strconv.Itoa(8 << 20)},
	}
}

// misbehavingShape is the steady mixed load with one event in ten sent
// to a misbehaving receiver instead.
func misbehavingShape(cfg config) loadShape {
	sh := defaultShape(cfg)
	sh.bad = true
	sh.mix = func(seq int64) string {
		if seq%10 == 9 {
			return kindBad
		}
		return kindOf(seq)
	}
	return sh
}

// env is what a fault acts on.
type env struct {
	cfg     config
	st      *stack
	cl      *harness.Kafka
	start   time.Time // load start
	faultMu sync.Mutex
	faultAt time.Time // first fault
}

// at waits until the load has run for frac of its length: a fault is
// scheduled at a point of the run, not waited for.
func (e *env) at(ctx context.Context, frac float64) error {
	t := time.NewTimer(time.Until(e.start.Add(time.Duration(frac * float64(e.cfg.Load)))))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (e *env) mark() {
	e.faultMu.Lock()
	defer e.faultMu.Unlock()
	if e.faultAt.IsZero() {
		e.faultAt = time.Now()
	}
}

// killRestart kill -9s the i-th process of kind and starts it again at
// once with the same arguments (same transactional id and group), as a
// supervisor would; ingest counts as back when it is SERVING.
func (e *env) killRestart(ctx context.Context, kind string, i int) error {
	p := e.st.find(kind, i)
	e.mark()
	if err := p.Kill9(); err != nil {
		return err
	}
	if err := p.Start(); err != nil {
		return err
	}
	if kind == "ingest" || kind == "dev" {
		return harness.WaitServing(ctx, e.st.ingest[i], 2*time.Minute, p)
	}
	return nil
}

var scenarios = []scenario{
	{name: "baseline", doc: "no fault: the ledger of an ordinary run"},
	{name: "overload", doc: "--overload-events (6,000) events of 16 KiB published as fast as ingest answers (512 in flight) to a receiver taking ~25/s until the load ends; ingest --max-in-flight-bytes 4 MiB, dispatcher --window-bytes 8 MiB"},
	{name: "misbehaving", doc: "the steady load with one event in ten to misbehaving receivers (endless/huge bodies, slowloris, garbage, cut connections, redirects to internal addresses, silence)"},
	{name: "quick", doc: "kill -9 a dispatcher at 1/4 of the load, an ingest at 1/2 and a broker at 3/4, back 5 s later (make test)", fault: func(ctx context.Context, e *env) (string, error) {
		if err := e.at(ctx, 0.25); err != nil {
			return "", err
		}
		if err := e.killRestart(ctx, "dispatcher", 0); err != nil {
			return "", err
		}
		if err := e.at(ctx, 0.5); err != nil {
			return "", err
		}
		if err := e.killRestart(ctx, "ingest", 0); err != nil {
			return "", err
		}
		if err := e.at(ctx, 0.75); err != nil {
			return "", err
		}
		node := max(e.cfg.Nodes-1, 1)
		if err := e.cl.Kill9(ctx, node); err != nil {
			return "", err
		}
		if err := e.at(ctx, 0.75+5/e.cfg.Load.Seconds()); err != nil {
			return "", err
		}
		return fmt.Sprintf("kill -9 dispatcher-0, then ingest-0, then broker %d (back 5 s later)", node), e.cl.Start(ctx, node)
	}},
	{name: "kill-dispatcher", doc: "kill -9 one of two dispatchers mid-load, restart it", fault: killOne("dispatcher")},
	{name: "kill-ingest", doc: "kill -9 one of two ingests mid-load, restart it", fault: killOne("ingest")},
	{name: "kill-scheduler", doc: "kill -9 one of two schedulers mid-load, restart it", fault: killOne("scheduler")},
	{name: "kill-in-rebalance", doc: "kill -9 dispatcher-0, restart it, and kill -9 dispatcher-1 while the group rebalances for the restart", fault: func(ctx context.Context, e *env) (string, error) {
		if err := e.at(ctx, 1.0/3); err != nil {
			return "", err
		}
		if err := e.killRestart(ctx, "dispatcher", 0); err != nil {
			return "", err
		}
		// The restarted member joins within about a second; kill the
		// other one while that join's rebalance is under way.
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(1500 * time.Millisecond):
		}
		return "kill -9 dispatcher-0, restart; 1.5 s later kill -9 dispatcher-1, restart", e.killRestart(ctx, "dispatcher", 1)
	}},
	{name: "sigstop", doc: "SIGSTOP dispatcher-0 past its group session (18 s), SIGCONT; then scheduler-0; then ingest-0", fault: func(ctx context.Context, e *env) (string, error) {
		var done []string
		for i, kind := range []string{"dispatcher", "scheduler", "ingest"} {
			if err := e.at(ctx, 0.1+0.3*float64(i)); err != nil {
				return "", err
			}
			what, err := e.pause(ctx, kind, 0, beyondSession)
			if err != nil {
				return "", err
			}
			done = append(done, what)
		}
		return strings.Join(done, ", then "), nil
	}},
	{name: "partition", doc: "cut dispatcher-0 off the brokers past its group session (18 s: its link silent both ways), heal; then scheduler-0; then ingest-0", fault: func(ctx context.Context, e *env) (string, error) {
		var done []string
		for i, name := range []string{"dispatcher-0", "scheduler-0", "ingest-0"} {
			if err := e.at(ctx, 0.1+0.3*float64(i)); err != nil {
				return "", err
			}
			what, err := e.partition(ctx, name, beyondSession)
			if err != nil {
				return "", err
			}
			done = append(done, what)
		}
		return strings.Join(done, ", then "), nil
	}},
	{name: "slow-link", doc: "400 ms on every Kafka request and response of dispatcher-0 for 20 s, then of scheduler-0, then of ingest-0", fault: func(ctx context.Context, e *env) (string, error) {
		var done []string
		for i, name := range []string{"dispatcher-0", "scheduler-0", "ingest-0"} {
			if err := e.at(ctx, 0.1+0.3*float64(i)); err != nil {
				return "", err
			}
			what, err := e.slowLink(ctx, name, 400*time.Millisecond, 20*time.Second)
			if err != nil {
				return "", err
			}
			done = append(done, what)
		}
		return strings.Join(done, ", then "), nil
	}},
	{name: "storm", doc: "a seeded (--seed), overlapping schedule of kill -9, SIGSTOP, partitions, slow links (and on 3 brokers leader bounces and a transaction coordinator's kill) over the first 70% of the load; the rest and the settle are quiet", fault: storm},
	{name: "bounce-leader", nodes: 3, doc: "move the leader of the busiest deliveries partition to the next replica every 3 s for 30 s (reassign, elect preferred)", fault: func(ctx context.Context, e *env) (string, error) {
		if err := e.at(ctx, 0.2); err != nil {
			return "", err
		}
		return e.bounceLeader(ctx, 3*time.Second, 30*time.Second)
	}},
	{name: "kill-txn-coordinator", nodes: 3, doc: "kill -9 the broker coordinating dispatcher-0's transactions mid-load, back 10 s later", fault: func(ctx context.Context, e *env) (string, error) {
		if err := e.at(ctx, 1.0/3); err != nil {
			return "", err
		}
		return e.killTxnCoordinator(ctx, 10*time.Second)
	}},
	{name: "kill-broker", nodes: 3, doc: "kill -9 one of three brokers mid-load, bring it back 10 s later", fault: func(ctx context.Context, e *env) (string, error) {
		if err := e.at(ctx, 1.0/3); err != nil {
			return "", err
		}
		e.mark()
		if err := e.cl.Kill9(ctx, 2); err != nil {
			return "", err
		}
		if err := e.at(ctx, 1.0/3+10/e.cfg.Load.Seconds()); err != nil {
			return "", err
		}
		return "kill -9 broker 2; restarted 10 s later", e.cl.Start(ctx, 2)
	}},
	{name: "cluster-down-30s", nodes: 3, doc: "kill -9 every broker mid-load, start them again 30 s later", fault: func(ctx context.Context, e *env) (string, error) {
		if err := e.at(ctx, 0.25); err != nil {
			return "", err
		}
		e.mark()
		for n := 1; n <= 3; n++ {
			if err := e.cl.Kill9(ctx, n); err != nil {
				return "", err
			}
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(30 * time.Second):
		}
		return "kill -9 all 3 brokers; restarted 30 s later", e.cl.Start(ctx, 0)
	}},
}

var devScenario = scenario{name: "dev-kill", dev: true, doc: "kill -9 `hookline dev` mid-load and start it again on the same data directory",
	fault: func(ctx context.Context, e *env) (string, error) {
		if err := e.at(ctx, 1.0/3); err != nil {
			return "", err
		}
		return "kill -9 `hookline dev` at 1/3 of the load, restarted on its data dir", e.killRestart(ctx, "dev", 0)
	}}

func init() {
	scenarios = append(scenarios, devScenario)
	for i := range scenarios {
		switch scenarios[i].name {
		case "overload":
			scenarios[i].shape = overloadShape
		case "misbehaving":
			scenarios[i].shape = misbehavingShape
		}
	}
}

func killOne(kind string) func(ctx context.Context, e *env) (string, error) {
	return func(ctx context.Context, e *env) (string, error) {
		if err := e.at(ctx, 1.0/3); err != nil {
			return "", err
		}
		return fmt.Sprintf("kill -9 %s-0 at 1/3 of the load, restarted at once", kind), e.killRestart(ctx, kind, 0)
	}
}

// runScenario runs s on a fresh stack (its own topic prefix) and returns
// its row of the table.
func runScenario(ctx context.Context, cfg config, cl *harness.Kafka, brokers string, s scenario) (rw row) {
	rw = row{Scenario: s.name, RSS: map[string]float64{}}
	shape := defaultShape(cfg)
	if s.shape != nil {
		shape = s.shape(cfg)
	}
	defer func() {
		if rw.Err != "" {
			fmt.Printf("scenario %s: %s\n", s.name, rw.Err)
		}
	}()
	rx, err := startReceivers(shape.bad)
	if err != nil {
		rw.Err = err.Error()
		return rw
	}
	defer rx.close()
	var st *stack
	if s.dev {
		st, err = startDev(ctx, cfg, s.name)
		brokers = st.brokersOrEmpty()
	} else {
		st, err = startStack(ctx, cfg, s.name, brokers, 2, shape)
	}
	if err != nil {
		rw.Err = err.Error()
		return rw
	}
	defer st.close()
	pub, err := newPublisher(st, st.prefix+"key", 90*time.Second, shape)
	if err != nil {
		rw.Err = err.Error()
		return rw
	}
	defer pub.close()
	if err := pub.createEndpoints(ctx, rx); err != nil {
		rw.Err = err.Error()
		return rw
	}
	res, err := followResults(strings.Split(brokers, ","), st.prefix+"results")
	if err != nil {
		rw.Err = err.Error()
		return rw
	}
	defer res.close()

	e := &env{cfg: cfg, st: st, cl: cl, start: time.Now()}
	loadCtx, cancel := context.WithTimeout(ctx, cfg.Load)
	defer cancel()
	var wg sync.WaitGroup
	var faultErr error
	if s.fault != nil {
		wg.Go(func() {
			rw.Faults, faultErr = s.fault(ctx, e)
		})
	}
	if shape.ordered {
		wg.Go(func() { pub.runOrdered(loadCtx) })
	}
	pub.run(loadCtx, shape.rate, shape.inflight, shape.maxEvents)
	if shape.relaxAfter {
		rx.relax()
	}
	wg.Wait()
	if faultErr != nil {
		rw.Err = "fault: " + faultErr.Error()
	}
	acc, unconfirmed, rejected := pub.snapshot()
	rw.Rejected = rejected
	rw.Settle = res.waitSettled(ctx, acc, cfg.Settle)
	for _, k := range []string{"ingest", "dispatcher", "scheduler", "dev"} {
		rw.RSS[k] = st.peakMiB(k)
	}
	rw.Exits = st.exited()
	seqs := map[string]int64{}
	for _, a := range acc {
		seqs[a.eventID] = a.seq
	}
	reconcile(&rw, acc, unconfirmed, res, rx, seqs)
	f := filepath.Join(cfg.LogDir, s.name, "ledger.tsv")
	if err := os.WriteFile(f, []byte(ledgerHeader+"\n"+strings.Join(rw.Ledger, "\n")+"\n"), 0o644); err == nil && rw.Lost > 0 {
		rw.Examples = append(rw.Examples, fmt.Sprintf("every delivery's ledger line (terminal '-': unfinished) is in %s", f))
	}
	rw.Recover = recovery(acc, rx, e.faultAt, 2*time.Second)
	rw.PushedBack, rw.PublishP99 = pub.pressure()
	rw.HealthyP99 = healthyP99(acc, rx)
	return rw
}

// render prints the table and what each column means.
func render(cfg config, rows []row, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n### Chaos: %d Kafka node(s), 2 × ingest / dispatcher / scheduler, %d events/s for %v per scenario unless it says otherwise (took %v)\n\n",
		cfg.Nodes, cfg.Rate, cfg.Load, took.Round(time.Second))
	b.WriteString("| scenario | accepted | delivered | dead-lettered | lost | duplicates | duplicates per delivery | order violations | exits by themselves | pushed back | publish p99 | healthy p99 | peak RSS ingest MiB | peak RSS dispatcher MiB | peak RSS scheduler MiB | time to recover | settled in | ledger |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|\n")
	for _, r := range rows {
		verdict := "ok"
		var bad []string
		if r.Err != "" {
			bad = append(bad, "error: "+r.Err)
		}
		if r.MultiTerminal > 0 {
			bad = append(bad, fmt.Sprintf("%d with >1 terminal outcome", r.MultiTerminal))
		}
		if r.deliveredNotReceived > 0 {
			bad = append(bad, fmt.Sprintf("%d DELIVERED never received", r.deliveredNotReceived))
		}
		if r.Phantom > 0 {
			bad = append(bad, fmt.Sprintf("%d received, never published", r.Phantom))
		}
		if r.BodyChanged > 0 {
			bad = append(bad, fmt.Sprintf("%d webhook-ids with two bodies", r.BodyChanged))
		}
		if r.OrderViolations > 0 {
			bad = append(bad, fmt.Sprintf("%d ordered deliveries first succeeded out of publish order", r.OrderViolations))
		}
		if r.BadRecords > 0 {
			bad = append(bad, fmt.Sprintf("%d undecodable results", r.BadRecords))
		}
		if len(bad) > 0 {
			verdict = "**FAIL**: " + strings.Join(bad, "; ")
		}
		if r.Unconfirmed > 0 {
			verdict += fmt.Sprintf("; %d publishes unanswered after 90 s of retries (%s), %d of them delivered anyway", r.Unconfirmed, codeCounts(r.Rejected), r.UnconfirmedDelivered)
		}
		name := r.Scenario
		if r.Faults != "" {
			name += " (" + r.Faults + ")"
		}
		rss := fmt.Sprintf("%.0f | %.0f | %.0f", r.RSS["ingest"], r.RSS["dispatcher"], r.RSS["scheduler"])
		if r.RSS["dev"] > 0 {
			rss = fmt.Sprintf("%.0f (one `hookline dev` process) | – | –", r.RSS["dev"])
		}
		order := "–"
		if r.OrderedLanes > 0 {
			order = fmt.Sprintf("%d (%d lanes, %d deliveries, %d repeated)", r.OrderViolations, r.OrderedLanes, r.OrderedMembers, r.OrderedRepeated)
		}
		exits := "0"
		if len(r.Exits) > 0 {
			exits = fmt.Sprintf("%d (first: %s)", len(r.Exits), r.Exits[0])
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d (%d ids) | %s | %s | %s | %d | %s | %s | %s | %s | %.0f s | %s |\n",
			name, r.Accepted, r.Delivered, r.Dead, r.Lost, r.Duplicates, r.DupIDs, r.dupPerDelivery(), order, exits,
			r.PushedBack, ms(r.PublishP99), ms(r.HealthyP99), rss, r.Recover, r.Settle.Seconds(), verdict)
	}
	b.WriteString(`
accepted: deliveries PublishEvent answered OK for. delivered / dead-lettered: first terminal
outcome on the results topic (read_committed) is DELIVERED / FAILED or EXPIRED. lost: accepted
with no terminal outcome when the settle wait ended, or DELIVERED yet never answered 2xx by its
receiver. duplicates: extra 2xx-answered requests for one webhook-id (at-least-once HTTP; all
carried the same webhook-id and body, or the ledger column says otherwise). duplicates per
delivery: duplicates / delivered (the target: at most 2%, none in a rolling upgrade). exits by
themselves: processes that exited without being killed or stopped by the run (the stack
restarts them after 2 s, as Kubernetes would, the first with its last log line; every one is in the run's output). order violations:
deliveries of an ordered lane (2 endpoints ordered per key × 20 keys, one of them "block", 1 ordered per endpoint;
each lane published one event at a time, in bursts of 3; 503 to one request in four) whose first 2xx-answered
request arrived before an earlier member's first 2xx answer was written; repeats are allowed,
members dead-lettered by skip are not compared; 0 expected ("repeated": lane members answered
2xx more than once). pushed back:
PublishEvent answers RESOURCE_EXHAUSTED (ingest's --max-in-flight-bytes), each retried after
its RetryInfo delay with the same key. publish p99: of the calls answered OK. healthy p99: from
the accepted publish to the healthy receiver's first request. peak RSS: the largest
VmRSS/VmHWM of any replica of the service, restarts included. time to recover: from the
first fault until healthy-receiver deliveries were again under 2 s from publish to receipt
(the publish time of the last late one). settled in: from the end of the load until every
accepted delivery had a terminal outcome.
`)
	return b.String()
}

// ms formats d in milliseconds, "–" for 0 (nothing measured).
func ms(d time.Duration) string {
	if d == 0 {
		return "–"
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

func codeCounts(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
