package main

import (
	"fmt"
	"slices"
	"time"
)

// quantiles of a set of latencies.
type quantiles struct {
	n                    int
	p50, p99, p999, maxD time.Duration
}

// quantilesOf sorts ds and reads p50, p99, p99.9 and the maximum.
func quantilesOf(ds []time.Duration) quantiles {
	if len(ds) == 0 {
		return quantiles{}
	}
	slices.Sort(ds)
	at := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
	return quantiles{n: len(ds), p50: at(0.50), p99: at(0.99), p999: at(0.999), maxD: ds[len(ds)-1]}
}

func (q quantiles) String() string {
	if q.n == 0 {
		return "no samples"
	}
	return fmt.Sprintf("p50 %s · p99 %s · p99.9 %s · max %s (n=%d)", ms(q.p50), ms(q.p99), ms(q.p999), ms(q.maxD), q.n)
}

// ms formats a duration in milliseconds (seconds when long).
func ms(d time.Duration) string {
	if d >= 10*time.Second {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

// perSec formats a rate.
func perSec(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// mib formats KiB as MiB.
func mib(kib int64) string { return fmt.Sprintf("%.0f MiB", float64(kib)/1024) }

// pct formats a ratio as a percentage.
func pct(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f%%", 100*a/b)
}
