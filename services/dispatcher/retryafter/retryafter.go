// Package retryafter parses the Retry-After response header (RFC 9110
// §10.2.3) as a receiver's request for how long to wait.
package retryafter

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxSeconds bounds delta-seconds before conversion so that an absurd
// value cannot overflow a time.Duration.
const maxSeconds = 100 * 365 * 24 * 3600

// Parse returns how long header asks to wait at now: delta-seconds
// ("120") or an HTTP-date in any of the three formats HTTP allows
// (IMF-fixdate, RFC 850, asctime). ok is false for an empty, unparsable or
// negative value, which callers treat as absent. A date in the past asks
// for no wait (0, true). The result is capped at limit.
func Parse(header string, now time.Time, limit time.Duration) (d time.Duration, ok bool) {
	v := strings.TrimSpace(header)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n > maxSeconds {
			// Larger than any sane wait: honour the cap.
			return limit, true
		}
		return min(time.Duration(n)*time.Second, limit), true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d = t.Sub(now)
	if d < 0 {
		return 0, true
	}
	return min(d, limit), true
}

func isDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Honoured reports whether a response with this status code carries a
// Retry-After that Hookline honours: 429 and 503 (SPEC R-BACKOFF-4).
func Honoured(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable
}
