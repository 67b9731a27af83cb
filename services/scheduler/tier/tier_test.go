package tier

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestRoute(t *testing.T) {
	now := time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC)
	tests := []struct {
		left time.Duration
		want Decision
	}{
		{-time.Minute, Decision{Release: true}},
		{0, Decision{Release: true}},
		{300 * time.Millisecond, Decision{InPlace: true}},
		{time.Second, Decision{Tier: time.Second}},
		{4 * time.Second, Decision{Tier: time.Second}},
		{5 * time.Second, Decision{Tier: 5 * time.Second}},
		{59 * time.Second, Decision{Tier: 30 * time.Second}},
		{2 * time.Hour, Decision{Tier: time.Hour}},
		{24 * time.Hour, Decision{Tier: time.Hour}},
	}
	for _, tt := range tests {
		if got := Default.Route(now, now.Add(tt.left)); got != tt.want {
			t.Errorf("Route(left %v) = %+v, want %+v", tt.left, got, tt.want)
		}
	}
}

// TestCascadeNeverReleasesEarlyAndIsLateByAtMostTheSmallestTier follows
// random due times through the tiers, as the scheduler does with zero
// processing time, and checks R-SCHED-2's two bounds.
func TestCascadeNeverReleasesEarlyAndIsLateByAtMostTheSmallestTier(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	start := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	for range 10_000 {
		due := start.Add(time.Duration(r.Int64N(int64(48 * time.Hour))))
		now, hops := start, 0
		for {
			d := Default.Route(now, due)
			if d.Release {
				break
			}
			if d.InPlace {
				now = due
				continue
			}
			now = Hold(d.Tier, now, due)
			hops++
			if hops > 100 {
				t.Fatalf("due %v: no release after 100 hops", due)
			}
		}
		if now.Before(due) {
			t.Fatalf("released at %v, before due %v", now, due)
		}
		if late := now.Sub(due); late > 0 {
			t.Fatalf("released %v late with zero processing time", late)
		}
	}
}

func TestParseAndName(t *testing.T) {
	ts, err := Parse([]string{"1h", "1s", "30s", "250ms"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"250ms", "1s", "30s", "1h"}
	for i, d := range ts {
		if Name(d) != want[i] {
			t.Errorf("tier %d: %s, want %s", i, Name(d), want[i])
		}
	}
	for _, bad := range [][]string{nil, {"1s", "1s"}, {"0s"}, {"10ms"}, {"soon"}} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}
