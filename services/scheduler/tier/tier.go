// Package tier decides where a pending retry waits. Timers live in Kafka:
// each delay tier is a topic whose records all wait the same time, so a
// tier partition is FIFO by release time and its consumer only ever waits
// for its head record. A record still far from due cascades down to the
// largest tier that fits the time left; a due record is released.
package tier

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Tiers is an ascending set of tier delays. It is immutable and safe for
// concurrent use.
type Tiers []time.Duration

// Default is the tier set used unless configured: 1s, 5s, 30s, 1m, 5m,
// 30m, 1h.
var Default = Tiers{time.Second, 5 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute, 30 * time.Minute, time.Hour}

// Parse reads tier delays such as "1s", "30s", "1h", sorts them and
// rejects duplicates, non-positive and sub-100ms values.
func Parse(list []string) (Tiers, error) {
	if len(list) == 0 {
		return nil, errors.New("tier: at least one delay tier is required")
	}
	ts := make(Tiers, 0, len(list))
	for _, s := range list {
		d, err := time.ParseDuration(s)
		if err != nil {
			return nil, fmt.Errorf("tier: %q: %w", s, err)
		}
		if d < 100*time.Millisecond {
			return nil, fmt.Errorf("tier: %q: a tier must be at least 100ms", s)
		}
		ts = append(ts, d)
	}
	slices.Sort(ts)
	for i := 1; i < len(ts); i++ {
		if ts[i] == ts[i-1] {
			return nil, fmt.Errorf("tier: %v is listed twice", ts[i])
		}
	}
	return ts, nil
}

// Name is the topic suffix of tier d: "1s", "30s", "5m", "1h", "250ms".
func Name(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}

// Decision is where a record goes next.
type Decision struct {
	// Release is true when the record is due: it goes back to the
	// deliveries topic.
	Release bool
	// Tier is the delay tier to wait in when not released.
	Tier time.Duration
	// InPlace is true when the record is due sooner than the smallest
	// tier: it waits where it is (in memory, its partition paused, its
	// offset uncommitted) until due, instead of hopping once more.
	InPlace bool
}

// Route decides, at now, what happens to a record due at due: released
// when due is not after now; otherwise the largest tier not longer than
// the time left, so it never waits past due in that tier; when even the
// smallest tier is longer, in place. A delay longer than the largest tier
// re-enters the largest.
func (ts Tiers) Route(now, due time.Time) Decision {
	left := due.Sub(now)
	if left <= 0 {
		return Decision{Release: true}
	}
	if left < ts[0] {
		return Decision{InPlace: true}
	}
	best := ts[0]
	for _, d := range ts {
		if d <= left {
			best = d
		}
	}
	return Decision{Tier: best}
}

// Hold returns when a record written to tier at written is to be looked
// at again: the tier's delay after it was written, or its due time if that
// is sooner.
func Hold(tier time.Duration, written, due time.Time) time.Time {
	h := written.Add(tier)
	if due.Before(h) {
		return due
	}
	return h
}
