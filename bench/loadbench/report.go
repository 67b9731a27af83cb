package main

import (
	"bufio"
	"bytes"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/hookline/hookline/bench/harness"
)

// report collects the table's rows. Not safe for concurrent use.
type report struct {
	header  []string
	rows    [][4]string // scenario, measure, value, ratio
	figs    []*figure   // per row: the number it reports, nil for text rows
	pending string      // scenario title for the next row
	extra   []string    // sections after the table
}

// figure is the number a row reports, so that repeated runs of a
// scenario can be summarised by their median and spread (repeat.go).
type figure struct {
	v      float64
	value  func(v float64) string // the value cell for v
	ratio  func(v float64) string // the ratio cell for v (nil: none)
	detail string                 // said after the value of this run only
}

// newReport describes the machine and the run.
func newReport(cfg config, mode string) *report {
	r := &report{}
	bin := filepath.Join(cfg.BinDir, "hookline")
	goVer, rev := binaryInfo(bin)
	if cfg.Commit != "" {
		rev = cfg.Commit
	} else if rev == "unknown" {
		rev = gitRevision(cfg.RepoDir)
	}
	r.header = []string{
		fmt.Sprintf("- machine: %d cores (%s), %s, %s/%s", runtime.NumCPU(), cpuModel(), memTotal(), runtime.GOOS, runtime.GOARCH),
		fmt.Sprintf("- Go: %s (binaries), %s (harness); Hookline commit %s", goVer, runtime.Version(), rev),
		"- Kafka: " + mode,
		fmt.Sprintf("- run: %s; warm-up %s, measuring window %s; payload 512-byte JSON; everything on 127.0.0.1; receiver, load and Hookline share the cores",
			time.Now().UTC().Format("2006-01-02 15:04 UTC"), cfg.Warmup, cfg.Window),
	}
	r.header = append(r.header, "- load average (1/5/15 min) at start: "+harness.LoadAvg()+
		" — other work on the machine takes cores from the measurement; check it is near 0")
	if cfg.Quick {
		r.header = append(r.header, "- **quick smoke run**: durations and counts shortened, numbers are not comparable")
	}
	return r
}

// section starts a scenario's rows.
func (r *report) section(title string) { r.pending = title }

// add appends one measure of the current scenario.
func (r *report) add(measure, value, ratio string) {
	r.rows = append(r.rows, [4]string{r.pending, measure, value, ratio})
	r.figs = append(r.figs, nil)
	r.pending = ""
}

// addFigure appends a measure that is a number: value formats it, ratio
// (optional) compares it with its target, detail is what this run adds
// (callers, latencies) and is kept only for the run whose figure is the
// median when the scenario is repeated.
func (r *report) addFigure(measure string, v float64, value func(float64) string, detail string, ratio func(float64) string) {
	f := &figure{v: v, value: value, ratio: ratio, detail: detail}
	r.add(measure, f.cell(), f.ratioCell())
	r.figs[len(r.figs)-1] = f
}

func (f *figure) cell() string {
	if f.detail == "" {
		return f.value(f.v)
	}
	return f.value(f.v) + " " + f.detail
}

func (f *figure) ratioCell() string {
	if f.ratio == nil {
		return ""
	}
	return f.ratio(f.v)
}

// appendix adds a section with a preformatted body after the table.
func (r *report) appendix(title, body string) {
	r.extra = append(r.extra, fmt.Sprintf("### %s\n\n```\n%s\n```\n", title, strings.TrimRight(body, "\n")))
}

// markdown renders the header, the table and the appendices.
func (r *report) markdown() string {
	var b strings.Builder
	b.WriteString("## Hookline load benchmark\n\n")
	for _, h := range r.header {
		b.WriteString(h + "\n")
	}
	b.WriteString("\n| scenario | measure | value | ratio |\n|---|---|---|---|\n")
	for _, row := range r.rows {
		cells := make([]string, len(row))
		for i, c := range row {
			cells[i] = strings.ReplaceAll(c, "|", `\|`)
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	b.WriteString("\nload average at end: " + harness.LoadAvg() + "\n")
	for _, e := range r.extra {
		b.WriteString("\n" + e)
	}
	return b.String()
}

// cpuModel reads the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	return procField("/proc/cpuinfo", "model name", "unknown CPU")
}

// memTotal reads MemTotal of /proc/meminfo.
func memTotal() string {
	v := procField("/proc/meminfo", "MemTotal", "")
	var kib int64
	if _, err := fmt.Sscanf(v, "%d kB", &kib); err != nil {
		return "memory unknown"
	}
	return fmt.Sprintf("%.0f GiB RAM", float64(kib)/(1<<20))
}

func procField(path, key, def string) string {
	f, err := os.Open(path)
	if err != nil {
		return def
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return def
}

// binaryInfo returns the Go version a binary was built with and the
// commit it was built from ("+dirty" when the tree had changes).
func binaryInfo(path string) (goVersion, revision string) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return "unknown", "unknown"
	}
	revision = "unknown"
	dirty := ""
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value[:min(len(s.Value), 12)]
		case "vcs.modified":
			if s.Value == "true" {
				dirty = " (+ uncommitted changes)"
			}
		}
	}
	return bi.GoVersion, revision + dirty
}

// gitRevision describes the working tree the binaries were built from,
// for binaries built without VCS stamps (as go.work builds are).
func gitRevision(repo string) string {
	out, err := exec.Command("git", "-C", repo, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	rev := strings.TrimSpace(string(out))
	changed, err := exec.Command("git", "-C", repo, "status", "--porcelain", "--untracked-files=no", "--",
		"services", "platform", "cmd", "gen", "proto").Output()
	if err == nil && len(bytes.TrimSpace(changed)) > 0 {
		rev += " (working tree, with uncommitted changes to Hookline's code)"
	}
	return rev
}
