package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
)

// runScheduler runs bench/schedbench (the scheduler benchmark make bench
// has always printed) against this run's Apache Kafka 4.4, and turns its
// figures into rows; its full output goes under the table.
func runScheduler(ctx context.Context, b *bench) error {
	bootstrap, err := b.broker.Up(ctx)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(b.cfg.BinDir, "schedbench"),
		"--brokers", bootstrap, "--scheduler-bin", filepath.Join(b.cfg.BinDir, "scheduler"),
		"--timers", strconv.Itoa(b.cfg.SchedTimers), "--probes", strconv.Itoa(b.cfg.SchedProbes),
		"--probe-window", b.cfg.SchedWindow.String(), "--settle", b.cfg.SchedSettle.String())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("schedbench (built by make bench into %s): %w\n%s", b.cfg.BinDir, err, out.String())
	}
	text := out.String()
	find := func(re string) string {
		if m := regexp.MustCompile(re).FindStringSubmatch(text); m != nil {
			return m[1]
		}
		return "?"
	}
	b.rep.add("timers parked", find(`pending timers parked\s+(.+)`), "")
	b.rep.add("scheduler RSS idle / 10% / all pending", fmt.Sprintf("%s / %s / %s MiB",
		find(`RSS idle\s+([\d.]+) MiB`), find(`RSS,\s+\d+ pending\s+([\d.]+) MiB`), find(`RSS,\s+`+strconv.Itoa(b.cfg.SchedTimers)+` pending\s+([\d.]+) MiB`)),
		"target < 200 MiB at 1M")
	b.rep.add("scheduler peak RSS · live heap", find(`peak RSS \(VmHWM\)\s+([\d.]+ MiB)`)+" · "+find(`live heap, last GC\s+(\S+ MB)`), "")
	b.rep.add("release lateness", find(`(p50 .+)`), "")
	b.rep.appendix("Scheduler benchmark output (bench/schedbench)", text)
	return nil
}
