package main

import (
	"testing"
	"time"
)

func TestQuantilesReadSortedRanks(t *testing.T) {
	var ds []time.Duration
	for i := 1000; i >= 1; i-- { // unsorted on purpose
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	q := quantilesOf(ds)
	tests := []struct {
		name       string
		give, want time.Duration
	}{
		{"p50", q.p50, 501 * time.Millisecond},
		{"p99", q.p99, 991 * time.Millisecond},
		{"p99.9", q.p999, 1000 * time.Millisecond},
		{"max", q.maxD, 1000 * time.Millisecond},
	}
	for _, tt := range tests {
		if tt.give != tt.want {
			t.Errorf("%s = %v, want %v", tt.name, tt.give, tt.want)
		}
	}
	if q.n != 1000 {
		t.Errorf("n = %d, want 1000", q.n)
	}
}

func TestQuantilesOfNothingSaysSo(t *testing.T) {
	if got := quantilesOf(nil).String(); got != "no samples" {
		t.Errorf("String() = %q, want %q", got, "no samples")
	}
}

func TestBenchPayloadIs512BytesOfJSON(t *testing.T) {
	p := benchPayload()
	if len(p) != 512 || p[0] != '{' || p[len(p)-1] != '}' {
		t.Errorf("payload is %d bytes %q…%q, want 512 bytes of one JSON object", len(p), p[:1], p[len(p)-1:])
	}
}

func TestPartitionOfIsStableAndInRange(t *testing.T) {
	for _, key := range []string{"ep_a", "ep_b", "ep_01J0000000000000000000000"} {
		p := partitionOf(key, 6)
		if p < 0 || p >= 6 || partitionOf(key, 6) != p {
			t.Errorf("partitionOf(%q, 6) = %d, want a stable partition in [0, 6)", key, p)
		}
	}
}
