// Command chaos proves that Hookline loses no accepted event while its
// processes are killed with SIGKILL and its Kafka brokers die: it runs
// bin/ingest, bin/dispatcher and bin/scheduler (two of each) as separate
// processes on Apache Kafka 4.4 (scripts/kafka.sh, one node or three),
// drives steady load through gRPC to loopback receivers that are healthy,
// slow, 50% 503, dead and hanging (and ordered lanes to receivers
// answering 503 one time in four, some lanes "block"), injects a fault
// per scenario — kill -9, SIGSTOP past the group session, a partition or
// a slow link between one process and the brokers (harness.KafkaLink),
// leader bounces, a broker or the transaction coordinator killed, or a
// seeded overlapping storm of them (--seed) — supervises the processes
// as Kubernetes would (one that exits by itself is restarted and named in
// the row), then
// reconciles a ledger: every delivery a PublishEvent accepted has exactly
// one terminal outcome on the results topic, every delivered one reached
// its receiver, duplicates carry the same webhook-id and body, nothing
// reached a receiver that was never published, and every ordered lane's
// members first succeeded in publish order. It prints one markdown
// table and exits non-zero if any row lost anything.
//
//	make build && go run ./chaos --scenarios quick          # what make test runs
//	make chaos                                               # every scenario
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hookline/hookline/bench/harness"
)

type config struct {
	RepoDir, BinDir, LogDir, KafkaDir string
	KafkaPort, Nodes                  int
	ReplicationFactor                 int
	Rate, OverloadEvents              int
	Load, Settle                      time.Duration
	Scenarios                         []string
	Out                               string
	Seed                              uint64 // the storm's schedule
	LogLevel                          string // every service's --log-level
}

func main() {
	os.Exit(run())
}

func run() int {
	var cfg config
	var scen string
	flag.StringVar(&cfg.RepoDir, "repo", ".", "repository root (scripts/kafka.sh lives there)")
	flag.StringVar(&cfg.BinDir, "bin", "bin", "directory of the binaries make build writes")
	flag.StringVar(&cfg.LogDir, "logs", "bin/chaos-logs", "directory for every process's log")
	flag.StringVar(&cfg.KafkaDir, "kafka-dir", "/tmp/hookline-chaos-kafka", "data directory of chaos's own Kafka (wiped at start)")
	flag.IntVar(&cfg.KafkaPort, "kafka-port", 19500, "first port of chaos's own Kafka: one node uses port..port+2, three nodes port+10..port+18")
	flag.IntVar(&cfg.Nodes, "nodes", 1, "Kafka brokers: 1, or 3 (replication factor 3, min.insync.replicas 2)")
	flag.IntVar(&cfg.Rate, "rate", 40, "events published per second (each to one endpoint)")
	flag.IntVar(&cfg.OverloadEvents, "overload-events", 6000, "events the overload scenario publishes (16 KiB each, as fast as ingest answers)")
	flag.DurationVar(&cfg.Load, "load", 45*time.Second, "how long each scenario publishes")
	flag.DurationVar(&cfg.Settle, "settle", 3*time.Minute, "how long to wait after the load for every accepted delivery to end (a bound, not a wait: above --outage-recheck, 2 min, so a delivery an outage holds at the load's end gets its probe)")
	flag.StringVar(&scen, "scenarios", "", "comma-separated scenarios (default: every one the --nodes allow); 'quick' = the make test run")
	flag.StringVar(&cfg.LogLevel, "log-level", "warn", "every service's --log-level (info or debug to follow a restart's steps in --logs)")
	flag.Uint64Var(&cfg.Seed, "seed", 1, "seed of the storm scenario's fault schedule (the same seed draws the same schedule)")
	flag.StringVar(&cfg.Out, "out", "bin/chaos-logs/results.md", "where the table is also written (not under bin/chaos: that is this binary)")
	flag.Parse()
	for _, p := range []*string{&cfg.RepoDir, &cfg.BinDir, &cfg.LogDir, &cfg.Out} {
		if a, err := filepath.Abs(*p); err == nil {
			*p = a
		}
	}
	if cfg.Nodes == 3 {
		// Ports and a directory of its own, so a one-node run's broker is
		// never in its way.
		cfg.ReplicationFactor = 3
		cfg.KafkaPort += 10
		cfg.KafkaDir += "-3"
	}
	var plan []scenario
	for _, s := range scenarios {
		if scen == "" && (s.nodes == 0 || s.nodes == cfg.Nodes) && s.name != "quick" {
			plan = append(plan, s)
		}
		if scen != "" && slices.Contains(strings.Split(scen, ","), s.name) {
			if s.nodes != 0 && s.nodes != cfg.Nodes {
				fmt.Fprintf(os.Stderr, "chaos: scenario %s needs --nodes %d\n", s.name, s.nodes)
				return 2
			}
			plan = append(plan, s)
		}
	}
	if len(plan) == 0 {
		fmt.Fprintln(os.Stderr, "chaos: no scenario selected")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cl := &harness.Kafka{RepoDir: cfg.RepoDir, Dir: cfg.KafkaDir, Port: cfg.KafkaPort, ControllerPort: cfg.KafkaPort + 1, TLSPort: cfg.KafkaPort + 2,
		Nodes: cfg.Nodes, Heap: "-Xms128m -Xmx512m"}
	defer func() { _ = cl.Down() }()
	start := time.Now()
	var brokers string
	if slices.ContainsFunc(plan, func(s scenario) bool { return !s.dev }) {
		var err error
		if brokers, err = cl.Up(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "chaos: Kafka (%d node(s)) at %s, ready in %v\n", cfg.Nodes, brokers, time.Since(start).Round(time.Second))
	}
	var rows []row
	for _, s := range plan {
		if ctx.Err() != nil {
			break
		}
		fmt.Fprintf(os.Stderr, "chaos: scenario %s ...\n", s.name)
		rw := runScenario(ctx, cfg, cl, brokers, s)
		fmt.Fprintf(os.Stderr, "chaos: %s: accepted %d delivered %d dead %d lost %d dup %d settle %v %s\n",
			s.name, rw.Accepted, rw.Delivered, rw.Dead, rw.Lost, rw.Duplicates, rw.Settle.Round(time.Second), rw.Err)
		for _, ex := range rw.Exits {
			fmt.Fprintf(os.Stderr, "chaos: %s: %s\n", s.name, ex)
		}
		for _, ex := range rw.Examples {
			fmt.Fprintf(os.Stderr, "chaos: %s: %s\n", s.name, ex)
		}
		rows = append(rows, rw)
	}
	table := render(cfg, rows, time.Since(start))
	fmt.Print(table)
	if err := os.MkdirAll(filepath.Dir(cfg.Out), 0o755); err == nil {
		_ = os.WriteFile(cfg.Out, []byte(table), 0o644)
	}
	for _, r := range rows {
		if !r.ok() {
			return 1
		}
	}
	if ctx.Err() != nil {
		return 1
	}
	return 0
}

// ok reports whether a row kept every promise of the ledger.
func (r row) ok() bool {
	return r.Err == "" && r.Lost == 0 && r.MultiTerminal == 0 && r.Phantom == 0 && r.BodyChanged == 0 && r.OrderViolations == 0 && r.BadRecords == 0 && r.Accepted > 0
}
