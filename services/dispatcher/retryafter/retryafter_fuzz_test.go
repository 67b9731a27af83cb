package retryafter

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// FuzzParseDeltaSeconds checks delta-seconds exactly: n seconds, capped
// at the limit, whatever n is (no overflow into a negative wait).
func FuzzParseDeltaSeconds(f *testing.F) {
	for _, n := range []uint64{0, 1, 120, 86400, maxSeconds, maxSeconds + 1, 1 << 62, 1<<64 - 1} {
		f.Add(n)
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const limit = 24 * time.Hour
	f.Fuzz(func(t *testing.T, n uint64) {
		d, ok := Parse(strconv.FormatUint(n, 10), now, limit)
		want := limit
		if n < uint64(limit/time.Second) {
			want = time.Duration(n) * time.Second
		}
		if !ok || d != want {
			t.Fatalf("Parse(%d) = %v, %v; want %v, true", n, d, ok, want)
		}
	})
}

// FuzzParseHTTPDate checks the HTTP-date form against the date it names:
// the wait until then, none for a date in the past, never past the limit.
func FuzzParseHTTPDate(f *testing.F) {
	for _, s := range []int64{0, 60, -60, 86400 * 400, -86400 * 365 * 100} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const limit = 24 * time.Hour
	f.Fuzz(func(t *testing.T, offset int64) {
		at := now.Add(time.Duration(offset%(1<<33)) * time.Second)
		if at.Year() < 1000 || at.Year() > 9999 {
			return // not a four-digit year: no HTTP-date names it
		}
		for _, layout := range []string{http.TimeFormat, time.RFC850, time.ANSIC} {
			h := at.Format(layout)
			if layout == time.RFC850 {
				h = at.Format("Monday, 02-Jan-06 15:04:05 GMT")
			}
			d, ok := Parse(h, now, limit)
			if !ok {
				if layout == time.RFC850 {
					continue // a two-digit year may name another century
				}
				t.Fatalf("Parse(%q) refused a valid HTTP-date", h)
			}
			want := min(max(at.Sub(now), 0), limit)
			if layout != time.RFC850 && d != want {
				t.Fatalf("Parse(%q) = %v, want %v", h, d, want)
			}
			if d < 0 || d > limit {
				t.Fatalf("Parse(%q) = %v outside [0, %v]", h, d, limit)
			}
		}
	})
}
