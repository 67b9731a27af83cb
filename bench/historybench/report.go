package main

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/hookline/hookline/bench/harness"
)

// report is the bench's findings.
type report struct {
	cfg                              benchConfig
	records                          int64
	loadTook, catchUp                time.Duration
	peakCatchUp, rss, rssAfter       float64
	get, list, getAfter, listAfter   []time.Duration
	disk                             int64
	restartServing, restartAnswering time.Duration
	resumedLine                      string
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

func (r report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Delivery history at %d deliveries (bench/historybench)\n\n", r.cfg.deliveries)
	fmt.Fprintf(&b, "%d deliveries of %d-byte payloads (one event each) and one result each, %d records, written straight to Apache Kafka 4.4 (one local broker, 6 partitions); bin/ingest with --data-dir (GOMEMLIMIT=%s) indexed them; %d CPUs, load average %s at the end, %s.\n\n",
		r.cfg.deliveries, r.cfg.payload, r.records, orNone(r.cfg.memLimit), runtime.NumCPU(), harness.LoadAvg(), time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintln(&b, "| figure | measured | target | |")
	fmt.Fprintln(&b, "|---|---|---|---|")
	fmt.Fprintf(&b, "| ingest RSS with the whole history indexed, after the queries | %.0f MiB | ≤ 150 MiB | %s |\n", r.rss, verdict(r.rss <= 150))
	fmt.Fprintf(&b, "| ingest RSS after the restart and its queries | %.0f MiB | ≤ 150 MiB | %s |\n", r.rssAfter, verdict(r.rssAfter <= 150))
	fmt.Fprintf(&b, "| ingest peak RSS while indexing from offset 0 | %.0f MiB | — | |\n", r.peakCatchUp)
	fmt.Fprintf(&b, "| GetDelivery p50 / p99 (%d calls, random ids) | %s / %s | p99 ≤ 10 ms | %s |\n", len(r.get), ms(pct(r.get, .5)), ms(pct(r.get, .99)), verdict(pct(r.get, .99) <= 10*time.Millisecond))
	fmt.Fprintf(&b, "| ListDeliveries page of 100 p50 / p99 (%d pages, 5 filter mixes, some by token) | %s / %s | p99 ≤ 10 ms | %s |\n", len(r.list), ms(pct(r.list, .5)), ms(pct(r.list, .99)), verdict(pct(r.list, .99) <= 10*time.Millisecond))
	fmt.Fprintf(&b, "| after the restart: GetDelivery p99, ListDeliveries p99 | %s, %s | ≤ 10 ms | %s |\n", ms(pct(r.getAfter, .99)), ms(pct(r.listAfter, .99)), verdict(pct(r.getAfter, .99) <= 10*time.Millisecond && pct(r.listAfter, .99) <= 10*time.Millisecond))
	fmt.Fprintf(&b, "| restart: exec to SERVING | %s | ≤ 5 s | %s |\n", r.restartServing.Round(time.Millisecond), verdict(r.restartServing <= 5*time.Second))
	fmt.Fprintf(&b, "| restart: exec to the first answer that includes the whole history | %s | — | |\n", r.restartAnswering.Round(time.Millisecond))
	fmt.Fprintf(&b, "| indexing from offset 0 (catch-up) | %s, %.0f records/s | — | |\n", r.catchUp.Round(time.Second), float64(r.records)/r.catchUp.Seconds())
	fmt.Fprintf(&b, "| index on disk | %.0f MiB (%.0f bytes a delivery) | — | |\n", float64(r.disk)/(1<<20), float64(r.disk)/float64(r.cfg.deliveries))
	fmt.Fprintf(&b, "| bulk load into Kafka | %s | — | |\n\n", r.loadTook.Round(time.Second))
	if r.resumedLine != "" {
		fmt.Fprintf(&b, "The restarted ingest resumed from its stored offsets (its log: `%s`).\n", r.resumedLine)
	}
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "unset"
	}
	return s
}
