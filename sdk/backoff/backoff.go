// Package backoff computes how long a failed delivery waits before its
// next attempt (SPEC R-BACKOFF). Delay is a pure function of the policy,
// the attempt number and an injected random source.
package backoff

import (
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
)

// Jitter spreads retries of deliveries that failed together.
type Jitter int

// Jitter strategies.
const (
	// JitterEqual waits d/2 + rand(0, d/2). The default.
	JitterEqual Jitter = iota
	// JitterFull waits rand(0, d).
	JitterFull
	// JitterNone waits exactly d.
	JitterNone
)

// Policy is a retry schedule: exponential when Ladder is empty, else the
// explicit ladder.
type Policy struct {
	// Initial is the exponential delay after the first failed attempt.
	Initial time.Duration
	// Factor multiplies the delay per attempt (2 doubles it).
	Factor float64
	// Max caps every computed delay before jitter.
	Max time.Duration
	// Ladder, when set, is the delay after failed attempt 1, 2, …; its
	// last rung repeats.
	Ladder []time.Duration
	Jitter Jitter
}

// Default is the platform default: 1 m doubling, capped at 1 h, equal
// jitter (SPEC R-BACKOFF-1, R-BACKOFF-2).
var Default = Policy{Initial: time.Minute, Factor: 2, Max: time.Hour, Jitter: JitterEqual}

// Rand is the random source Delay draws from; *math/rand/v2.Rand
// satisfies it.
type Rand interface {
	Int64N(n int64) int64
}

// Nominal returns the delay after failed attempt n (1-based) before
// jitter.
func (p Policy) Nominal(n uint32) time.Duration {
	if n < 1 {
		n = 1
	}
	if len(p.Ladder) > 0 {
		i := int(n) - 1
		if i >= len(p.Ladder) {
			i = len(p.Ladder) - 1
		}
		return p.Ladder[i]
	}
	d := float64(p.Initial)
	factor := p.Factor
	if factor < 1 {
		factor = 1
	}
	for i := uint32(1); i < n; i++ {
		d *= factor
		if p.Max > 0 && d >= float64(p.Max) {
			return p.Max
		}
	}
	if p.Max > 0 && d > float64(p.Max) {
		return p.Max
	}
	return time.Duration(d)
}

// Delay returns the jittered delay after failed attempt n.
func (p Policy) Delay(n uint32, r Rand) time.Duration {
	d := p.Nominal(n)
	if d <= 0 {
		return 0
	}
	switch p.Jitter {
	case JitterFull:
		return time.Duration(r.Int64N(int64(d) + 1))
	case JitterNone:
		return d
	default:
		half := d / 2
		return half + time.Duration(r.Int64N(int64(d-half)+1))
	}
}

// FromProto returns the policy an endpoint asks for, with def filling
// what it leaves unset. A nil policy is def.
func FromProto(rp *hooklinev1.RetryPolicy, def Policy) Policy {
	if rp == nil {
		return def
	}
	p := def
	switch s := rp.GetSchedule().(type) {
	case *hooklinev1.RetryPolicy_Exponential:
		p.Ladder = nil
		if d := s.Exponential.GetInitial().AsDuration(); d > 0 {
			p.Initial = d
		}
		if f := s.Exponential.GetFactor(); f >= 1 {
			p.Factor = f
		}
		if d := s.Exponential.GetMax().AsDuration(); d > 0 {
			p.Max = d
		}
	case *hooklinev1.RetryPolicy_Ladder:
		p.Ladder = make([]time.Duration, 0, len(s.Ladder.GetDelays()))
		for _, d := range s.Ladder.GetDelays() {
			p.Ladder = append(p.Ladder, d.AsDuration())
		}
	}
	switch rp.GetJitter() {
	case hooklinev1.RetryPolicy_JITTER_EQUAL:
		p.Jitter = JitterEqual
	case hooklinev1.RetryPolicy_JITTER_FULL:
		p.Jitter = JitterFull
	case hooklinev1.RetryPolicy_JITTER_NONE:
		p.Jitter = JitterNone
	}
	return p
}
