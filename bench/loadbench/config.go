package main

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"
)

// allScenarios lists every scenario in the order a full run takes them.
var allScenarios = []string{"ceiling", "lifted", "default", "latency", "ingest", "isolation", "isolation-saturated", "backlog", "storm", "scheduler", "ordered", "badlane", "held", "filters", "batching"}

// config is every setting of a run. Durations and counts bound each
// scenario; --quick replaces them with a smoke run's.
type config struct {
	Kafka     string   // "embedded" (hookline dev) or "real" (Apache Kafka 4.4 and three services)
	Scenarios []string // which scenarios to run, in allScenarios order
	Quick     bool     // smoke run: every bound shortened
	Repeat    int      // runs of each throughput scenario (the table gives medians)
	BinDir    string   // where make build put hookline, ingest, dispatcher, scheduler, schedbench
	RepoDir   string   // repository root (scripts/kafka.sh)
	Out       string   // markdown results file
	LogDir    string   // subprocess logs
	Commit    string   // what the binaries were built from, when they carry no VCS stamp

	Warmup     time.Duration // load before a measuring window opens
	Window     time.Duration // measuring window of the steady-state scenarios
	Publishers int           // concurrent PublishEvent callers when offering as fast as possible
	PublishCap int           // most deliveries published but not yet received in the lifted scenario
	CeilingC   int           // concurrent requests of the ceiling client
	Drain      time.Duration // after a paced load, how long its last events may take to arrive

	Backlog     int           // deliveries queued for the backlogged endpoint
	BacklogFor  time.Duration // how long the backlog scenario runs once queued
	Storm       int           // deliveries in the retry storm
	StormFail   time.Duration // how long the receiver answers 503
	StormDrain  time.Duration // how long the storm may take to drain after recovery
	Held        int           // deliveries held by the paused endpoint of the held scenario
	HoldFor     time.Duration // how long they are held
	SchedTimers int           // pending timers schedbench parks
	SchedProbes int           // timers schedbench releases for lateness
	SchedWindow time.Duration // over this window
	SchedSettle time.Duration // schedbench's idle time before each RSS reading

	ProfileDir string // where the ingest scenario writes profiles of hookline dev; empty: none
	PprofAddr  string // the --pprof-addr hookline dev is given when profiling

	KafkaPort, KafkaControllerPort, KafkaTLSPort int    // the broker kafka.sh starts for real runs and the scheduler
	KafkaDir                                     string // its data dir
}

// parseConfig reads flags; -h prints them and returns flag.ErrHelp.
func parseConfig(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("loadbench", flag.ContinueOnError)
	fs.StringVar(&c.Kafka, "kafka", "embedded", "embedded: one bin/hookline dev process on kfake; real: Apache Kafka 4.4 (scripts/kafka.sh) with bin/ingest, bin/dispatcher, bin/scheduler")
	scen := fs.String("scenarios", strings.Join(allScenarios, ","), "comma-separated scenarios to run: "+strings.Join(allScenarios, ","))
	fs.BoolVar(&c.Quick, "quick", false, "smoke run: every duration and count shortened (well under 2 minutes without the scheduler)")
	fs.IntVar(&c.Repeat, "repeat", 3, "runs of each throughput scenario (ceiling, lifted, default, ingest), back to back: the table gives each figure's median, every run's and the spread, and each run's load average (1 with --quick unless set)")
	fs.StringVar(&c.BinDir, "bin", "bin", "directory with the binaries make build writes")
	fs.StringVar(&c.RepoDir, "repo", ".", "repository root (for scripts/kafka.sh)")
	fs.StringVar(&c.Out, "out", "bin/bench/results.md", "markdown file the table is written to (also printed)")
	fs.StringVar(&c.Commit, "commit", "", "what the binaries in --bin were built from, for the table (default: their VCS stamp, else git HEAD of --repo)")
	fs.StringVar(&c.LogDir, "log-dir", "bin/bench/logs", "subprocess logs")
	fs.DurationVar(&c.Warmup, "warmup", 5*time.Second, "load before each measuring window opens")
	fs.DurationVar(&c.Window, "window", 30*time.Second, "measuring window of the throughput, latency, ingest and isolation scenarios")
	fs.IntVar(&c.Publishers, "publishers", 64, "concurrent PublishEvent callers when offering load as fast as possible")
	fs.IntVar(&c.PublishCap, "publish-ahead", 20000, "most deliveries published but not yet received in the limits-lifted scenario")
	fs.IntVar(&c.CeilingC, "ceiling-concurrency", 64, "concurrent requests of the ceiling client")
	fs.DurationVar(&c.Drain, "drain", 30*time.Second, "after a paced load, how long its last events may take to arrive before they count as not delivered")
	fs.IntVar(&c.Backlog, "backlog", 100000, "deliveries queued for the backlogged endpoint")
	fs.DurationVar(&c.BacklogFor, "backlog-for", 30*time.Second, "how long the backlog scenario measures once the backlog is queued")
	fs.IntVar(&c.Storm, "storm", 100000, "deliveries in the retry storm")
	fs.DurationVar(&c.StormFail, "storm-fail-for", 15*time.Second, "how long the storm's receiver answers 503")
	fs.DurationVar(&c.StormDrain, "storm-drain", 150*time.Second, "longest the storm may take to drain after the receiver recovers")
	fs.IntVar(&c.Held, "held", 100, "held scenario: 64 KiB deliveries held by one paused endpoint")
	fs.DurationVar(&c.HoldFor, "hold-for", 2*time.Minute, "held scenario: how long they are held before the resume")
	fs.IntVar(&c.SchedTimers, "sched-timers", 1000000, "scheduler scenario: pending timers parked")
	fs.IntVar(&c.SchedProbes, "sched-probes", 2000, "scheduler scenario: timers released for lateness")
	fs.DurationVar(&c.SchedWindow, "sched-probe-window", 60*time.Second, "scheduler scenario: probes come due over this window")
	fs.DurationVar(&c.SchedSettle, "sched-settle", 20*time.Second, "scheduler scenario: idle time before each RSS reading")
	fs.StringVar(&c.ProfileDir, "profile-dir", "", "embedded only: the ingest scenario takes a CPU and an allocation profile of hookline dev during each closed-loop window into this directory (default: none)")
	fs.StringVar(&c.PprofAddr, "pprof-addr", "127.0.0.1:16061", "with --profile-dir: the loopback --pprof-addr every hookline dev is started with")
	fs.IntVar(&c.KafkaPort, "kafka-port", 19392, "PLAINTEXT port of the Apache Kafka this run starts (real mode and the scheduler scenario)")
	fs.IntVar(&c.KafkaControllerPort, "kafka-controller-port", 19393, "its controller port")
	fs.IntVar(&c.KafkaTLSPort, "kafka-tls-port", 19394, "its TLS port")
	fs.StringVar(&c.KafkaDir, "kafka-dir", "bin/bench/kafka", "its data dir (wiped on start)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.Kafka != "embedded" && c.Kafka != "real" {
		return c, fmt.Errorf("--kafka: want embedded or real, got %q", c.Kafka)
	}
	if c.Repeat < 1 || c.Repeat > 9 {
		return c, fmt.Errorf("--repeat %d: want 1 to 9 runs", c.Repeat)
	}
	if c.ProfileDir != "" && c.Kafka != "embedded" {
		return c, fmt.Errorf("--profile-dir: only with --kafka embedded (one process to profile)")
	}
	for _, s := range strings.Split(*scen, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !slices.Contains(allScenarios, s) {
			return c, fmt.Errorf("--scenarios: unknown %q (have %s)", s, strings.Join(allScenarios, ","))
		}
		c.Scenarios = append(c.Scenarios, s)
	}
	if c.Quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		shorten := func(name string, apply func()) {
			if !set[name] {
				apply()
			}
		}
		shorten("repeat", func() { c.Repeat = 1 })
		shorten("warmup", func() { c.Warmup = 2 * time.Second })
		shorten("window", func() { c.Window = 5 * time.Second })
		shorten("drain", func() { c.Drain = 10 * time.Second })
		shorten("backlog", func() { c.Backlog = 5000 })
		shorten("backlog-for", func() { c.BacklogFor = 5 * time.Second })
		shorten("storm", func() { c.Storm = 5000 })
		shorten("storm-fail-for", func() { c.StormFail = 3 * time.Second })
		shorten("storm-drain", func() { c.StormDrain = 60 * time.Second })
		shorten("held", func() { c.Held = 20 })
		shorten("hold-for", func() { c.HoldFor = 30 * time.Second })
		shorten("sched-timers", func() { c.SchedTimers = 50000 })
		shorten("sched-probes", func() { c.SchedProbes = 200 })
		shorten("sched-probe-window", func() { c.SchedWindow = 10 * time.Second })
		shorten("sched-settle", func() { c.SchedSettle = 2 * time.Second })
	}
	return c, nil
}

// wants reports whether scenario s is selected.
func (c config) wants(s string) bool { return slices.Contains(c.Scenarios, s) }
