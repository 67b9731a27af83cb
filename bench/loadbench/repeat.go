package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hookline/hookline/bench/harness"
)

// A throughput figure from one run on a shared 2-core machine moves with
// whatever else runs (the load average of earlier tables went from 1 to
// 6 between runs of one commit). A repeated scenario runs cfg.Repeat
// times, back to back, and the table gives each figure's median, every
// run's figure and the spread, and each run's load average at its start
// and end, so a reader can tell a change from the machine's weather.

// repeatedRun is one run of a repeated scenario.
type repeatedRun struct {
	rep      *report
	from, to string // load average at its start and end
	err      error
}

// runRepeated runs s n times (stopping at the first failure) and adds
// to b.rep the summary of the runs that succeeded, then the failure.
func runRepeated(ctx context.Context, b *bench, s scenario, n int) error {
	main := b.rep
	var runs []repeatedRun
	for range n {
		b.rep = &report{}
		r := repeatedRun{from: harness.LoadAvg()}
		r.err = s.run(ctx, b)
		r.rep, r.to = b.rep, harness.LoadAvg()
		runs = append(runs, r)
		if r.err != nil || ctx.Err() != nil {
			break
		}
	}
	b.rep = main
	ok := slices.DeleteFunc(slices.Clone(runs), func(r repeatedRun) bool { return r.err != nil })
	medians := summarise(b.rep, ok)
	if s.keep != nil && len(ok) > 0 {
		s.keep(b, medians)
	}
	var loads []string
	for i, r := range runs {
		loads = append(loads, fmt.Sprintf("run %d: %s → %s", i+1, firstField(r.from), firstField(r.to)))
	}
	b.rep.add("runs (load average, 1 min, at start → end)", strings.Join(loads, "; "), "")
	if last := runs[len(runs)-1]; last.err != nil {
		return fmt.Errorf("run %d of %d: %w", len(runs), n, last.err)
	}
	return nil
}

// summarise adds one row per measure of runs (in the first run's order)
// to rep and returns each figure's median by measure. A figure's row is
// the median, what the median run said beside it, every run's figure
// and the spread ((max − min) / median); its ratio is the median's. A
// text row is the median run's: the run whose first figure is the
// median of the first figure.
func summarise(rep *report, runs []repeatedRun) map[string]float64 {
	medians := map[string]float64{}
	if len(runs) == 0 {
		return medians
	}
	// figureOf returns r's figure for measure, or nil.
	figureOf := func(r *report, measure string) *figure {
		for i, row := range r.rows {
			if row[1] == measure && r.figs[i] != nil {
				return r.figs[i]
			}
		}
		return nil
	}
	figs := func(measure string) []*figure {
		var out []*figure
		for _, r := range runs {
			if f := figureOf(r.rep, measure); f != nil {
				out = append(out, f)
			}
		}
		return out
	}
	mid := runs[0].rep
	if i := slices.IndexFunc(runs[0].rep.figs, func(f *figure) bool { return f != nil }); i >= 0 {
		measure := runs[0].rep.rows[i][1]
		m := median(figs(measure))
		for _, r := range runs {
			if figureOf(r.rep, measure) == m {
				mid = r.rep
			}
		}
	}
	for i, row := range mid.rows {
		f := mid.figs[i]
		if f == nil {
			rep.add(row[1], row[2], row[3])
			continue
		}
		all := figs(row[1])
		m := median(all)
		medians[row[1]] = m.v
		var each []string
		lo, hi := all[0].v, all[0].v
		for _, g := range all {
			each = append(each, g.value(g.v))
			lo, hi = min(lo, g.v), max(hi, g.v)
		}
		spread := "n/a"
		if m.v != 0 {
			spread = fmt.Sprintf("%.0f%%", 100*(hi-lo)/m.v)
		}
		value := fmt.Sprintf("median %s", m.cell())
		if len(all) > 1 {
			value += fmt.Sprintf(" — runs %s (spread %s)", strings.Join(each, " · "), spread)
		}
		rep.add(row[1], value, m.ratioCell())
	}
	return medians
}

// median returns the figure in the middle of fs by value (the upper
// middle one of an even count).
func median(fs []*figure) *figure {
	s := slices.Clone(fs)
	slices.SortStableFunc(s, func(a, b *figure) int {
		switch {
		case a.v < b.v:
			return -1
		case a.v > b.v:
			return 1
		}
		return 0
	})
	return s[len(s)/2]
}

// firstField is the first of the load averages harness.LoadAvg reports.
func firstField(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return s
}
