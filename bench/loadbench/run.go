package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hookline/hookline/bench/harness"
)

// bench is what every scenario shares: the settings, how to start a
// Hookline, the broker (real mode and the scheduler), the report, and the
// ceiling once measured.
type bench struct {
	cfg     config
	launch  launcher
	broker  *harness.Kafka
	rep     *report
	payload []byte
	ceiling float64 // deliveries/s of the plain client; 0 until measured
}

// scenario is one row group of the table.
type scenario struct {
	name  string
	title string
	limit time.Duration // a last-resort bound on top of the scenario's own (per run)
	run   func(ctx context.Context, b *bench) error
	// repeat marks a throughput scenario: it runs cfg.Repeat times and
	// the table gives medians (repeat.go).
	repeat bool
	// keep, if set, takes what later scenarios need from the medians of
	// a repeated scenario's figures, by measure.
	keep func(b *bench, medians map[string]float64)
}

// scenarios in the order a run takes them.
func scenarios() []scenario {
	return []scenario{
		{name: "ceiling", title: "1. ceiling: plain Go HTTP client → receiver", limit: 3 * time.Minute, run: runCeiling, repeat: true,
			keep: func(b *bench, m map[string]float64) { b.ceiling = m[ceilingMeasure] }},
		{name: "lifted", title: "2. throughput, limits lifted (100 endpoints, fan-out 10)", limit: 5 * time.Minute, run: runLifted, repeat: true},
		{name: "default", title: "3. throughput, default limits (10 endpoints)", limit: 5 * time.Minute, run: runDefault, repeat: true},
		{name: "latency", title: "4. latency publish → receiver at 2,000 events/s", limit: 5 * time.Minute, run: runLatency},
		{name: "ingest", title: "5. ingest: PublishEvent, fan-out 1 and 10", limit: 6 * time.Minute, run: runIngest, repeat: true},
		{name: "isolation", title: "6. isolation: 60 healthy beside 30 slow + 10 hanging", limit: 8 * time.Minute, run: runIsolation},
		{name: "isolation-saturated", title: "6b. isolation at saturation: 60 healthy at the rate they reach alone, beside 30 slow (9 s) + 10 hanging", limit: 8 * time.Minute, run: runIsolationSaturated},
		{name: "backlog", title: "7. backlog: 1 endpoint with a queue beside 9 healthy", limit: 8 * time.Minute, run: runBacklog},
		{name: "storm", title: "8. retry storm: 503s, then recovery", limit: 10 * time.Minute, run: runStorm},
		{name: "scheduler", title: "9. scheduler (schedbench, Apache Kafka 4.4)", limit: 15 * time.Minute, run: runScheduler},
		{name: "ordered", title: "10. ordered per key: 1,000 keys vs unordered, one endpoint", limit: 5 * time.Minute, run: runOrdered},
		{name: "badlane", title: "11. ordered per key: one blocked lane beside 999", limit: 5 * time.Minute, run: runBadLane},
		{name: "held", title: "12. held: 64 KiB deliveries held by a paused endpoint (F3)", limit: 6 * time.Minute, run: runHeld},
		{name: "filters", title: "13. filters: PublishEvent at fan-out 10, with a content filter on every endpoint and a transformation on one, against none", limit: 6 * time.Minute, run: runFilters},
		{name: "batching", title: "14. batching: one endpoint whose receiver takes 10 ms a request, batched by 100 against unbatched", limit: 6 * time.Minute, run: runBatching},
	}
}

// run parses args, runs the chosen scenarios one after another (a failed
// scenario is reported and the next one runs), and writes the table.
func run(ctx context.Context, args []string) error {
	cfg, err := parseConfig(args)
	if err != nil {
		return err
	}
	b := &bench{cfg: cfg, broker: &harness.Kafka{RepoDir: cfg.RepoDir, Dir: cfg.KafkaDir, Port: cfg.KafkaPort, ControllerPort: cfg.KafkaControllerPort, TLSPort: cfg.KafkaTLSPort}, payload: benchPayload()}
	defer func() {
		if err := b.broker.Down(); err != nil {
			fmt.Fprintln(os.Stderr, "loadbench: stopping Kafka:", err)
		}
	}()
	if cfg.ProfileDir != "" {
		// Every hookline dev this run starts inherits it (one at a time).
		if err := os.Setenv("HOOKLINE_PPROF_ADDR", cfg.PprofAddr); err != nil {
			return err
		}
	}
	if cfg.Kafka == "real" {
		b.launch = &real{cfg: cfg, broker: b.broker}
	} else {
		b.launch = embedded{cfg: cfg}
	}
	b.rep = newReport(cfg, b.launch.describe())
	var failed []string
	for _, s := range scenarios() {
		if !cfg.wants(s.name) {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		progress("%s ...", s.title)
		start := time.Now()
		b.rep.section(s.title)
		var err error
		if s.repeat && cfg.Repeat > 1 {
			sctx, cancel := context.WithTimeout(ctx, time.Duration(cfg.Repeat)*s.limit)
			err = runRepeated(sctx, b, s, cfg.Repeat)
			cancel()
		} else {
			sctx, cancel := context.WithTimeout(ctx, s.limit)
			err = s.run(sctx, b)
			cancel()
		}
		if err != nil {
			failed = append(failed, s.name)
			b.rep.add("**failed**", err.Error(), "")
			progress("%s failed after %s: %v", s.name, time.Since(start).Round(time.Second), err)
			continue
		}
		progress("%s done in %s", s.name, time.Since(start).Round(time.Second))
	}
	md := b.rep.markdown()
	fmt.Print(md)
	if err := os.MkdirAll(filepath.Dir(cfg.Out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(cfg.Out, []byte(md), 0o644); err != nil {
		return err
	}
	progress("table written to %s", cfg.Out)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if len(failed) > 0 {
		return errors.New("scenarios failed: " + strings.Join(failed, ", "))
	}
	return nil
}

// progress prints a timestamped line to stderr, so stdout stays the table.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s loadbench: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
