package backoff

import (
	"math/rand/v2"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestNominalDefaultLadder(t *testing.T) {
	want := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 32 * time.Minute, time.Hour, time.Hour, time.Hour}
	for i, w := range want {
		if got := Default.Nominal(uint32(i + 1)); got != w {
			t.Errorf("attempt %d: got %v, want %v", i+1, got, w)
		}
	}
	if got := Default.Nominal(200); got != time.Hour {
		t.Errorf("attempt 200: got %v, want the 1h cap (no overflow)", got)
	}
}

func TestNominalExplicitLadder(t *testing.T) {
	p := Policy{Ladder: []time.Duration{time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 6 * time.Hour, 24 * time.Hour}}
	want := []time.Duration{time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 6 * time.Hour, 24 * time.Hour, 24 * time.Hour}
	for i, w := range want {
		if got := p.Nominal(uint32(i + 1)); got != w {
			t.Errorf("attempt %d: got %v, want %v", i+1, got, w)
		}
	}
}

func TestJitterBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	tests := []struct {
		jitter   Jitter
		min, max time.Duration
	}{
		{JitterEqual, 30 * time.Second, time.Minute},
		{JitterFull, 0, time.Minute},
		{JitterNone, time.Minute, time.Minute},
	}
	for _, tt := range tests {
		p := Default
		p.Jitter = tt.jitter
		for range 10_000 {
			d := p.Delay(1, r)
			if d < tt.min || d > tt.max {
				t.Fatalf("jitter %v: %v outside [%v, %v]", tt.jitter, d, tt.min, tt.max)
			}
		}
	}
}

func TestFromProto(t *testing.T) {
	rp := &hooklinev1.RetryPolicy{
		Schedule: &hooklinev1.RetryPolicy_Ladder{Ladder: &hooklinev1.RetryPolicy_DelayLadder{
			Delays: []*durationpb.Duration{durationpb.New(time.Minute), durationpb.New(5 * time.Minute)},
		}},
		Jitter: hooklinev1.RetryPolicy_JITTER_NONE,
	}
	p := FromProto(rp, Default)
	if p.Nominal(2) != 5*time.Minute || p.Jitter != JitterNone {
		t.Fatalf("got %+v", p)
	}
	if got := FromProto(nil, Default); got.Initial != Default.Initial {
		t.Fatalf("nil policy: got %+v", got)
	}
}
