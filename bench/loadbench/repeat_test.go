package main

import (
	"strings"
	"testing"
)

func TestSummariseGivesTheMedianRunsFiguresAndItsText(t *testing.T) {
	var runs []repeatedRun
	for _, v := range []float64{900, 1200, 1000} {
		r := &report{}
		r.addFigure("deliveries/s", v, rateCell, "(detail of "+rateCell(v)+")", func(v float64) string { return pct(v, 2000) })
		r.add("note", "run of "+rateCell(v), "")
		runs = append(runs, repeatedRun{rep: r})
	}
	out := &report{}
	m := summarise(out, runs)
	if m["deliveries/s"] != 1000 {
		t.Fatalf("median %v, want 1000", m["deliveries/s"])
	}
	if len(out.rows) != 2 {
		t.Fatalf("rows %v, want the figure and the note", out.rows)
	}
	fig := out.rows[0]
	for _, want := range []string{"median 1000/s (detail of 1000/s)", "runs 900/s · 1200/s · 1000/s", "spread 30%"} {
		if !strings.Contains(fig[2], want) {
			t.Errorf("figure cell %q lacks %q", fig[2], want)
		}
	}
	if fig[3] != "50%" {
		t.Errorf("ratio %q, want the median's 50%%", fig[3])
	}
	if out.rows[1][2] != "run of 1000/s" {
		t.Errorf("text row %q, want the median run's", out.rows[1][2])
	}
}
