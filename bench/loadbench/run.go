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
	limit time.Duration // a last-resort bound on top of the scenario's own
	run   func(ctx context.Context, b *bench) error
}

// scenarios in the order a run takes them.
func scenarios() []scenario {
	return []scenario{
		{"ceiling", "1. ceiling: plain Go HTTP client → receiver", 3 * time.Minute, runCeiling},
		{"lifted", "2. throughput, limits lifted (100 endpoints, fan-out 10)", 5 * time.Minute, runLifted},
		{"default", "3. throughput, default limits (10 endpoints)", 5 * time.Minute, runDefault},
		{"latency", "4. latency publish → receiver at 2,000 events/s", 5 * time.Minute, runLatency},
		{"ingest", "5. ingest: PublishEvent, fan-out 1 and 10", 6 * time.Minute, runIngest},
		{"isolation", "6. isolation: 60 healthy beside 30 slow + 10 hanging", 8 * time.Minute, runIsolation},
		{"backlog", "7. backlog: 1 endpoint with a queue beside 9 healthy", 8 * time.Minute, runBacklog},
		{"storm", "8. retry storm: 503s, then recovery", 10 * time.Minute, runStorm},
		{"scheduler", "9. scheduler (schedbench, Apache Kafka 4.4)", 15 * time.Minute, runScheduler},
		{"ordered", "10. ordered per key: 1,000 keys vs unordered, one endpoint", 5 * time.Minute, runOrdered},
		{"badlane", "11. ordered per key: one blocked lane beside 999", 5 * time.Minute, runBadLane},
		{"held", "12. held: 64 KiB deliveries held by a paused endpoint (F3)", 6 * time.Minute, runHeld},
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
		sctx, cancel := context.WithTimeout(ctx, s.limit)
		err := s.run(sctx, b)
		cancel()
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
