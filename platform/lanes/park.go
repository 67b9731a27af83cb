package lanes

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ParkedBehindHeader marks a parked record (the parked topic) of a
// member held behind its lane's blocked head; its value is the lane's
// ordering key (empty for a per_endpoint lane). The scheduler releases
// such a record when the lanes topic no longer says a blocked head comes
// before the member (View.BlockedBefore), not when its endpoint resumes;
// the dispatcher parks the member again if it is still blocked when it
// comes back (its view may be ahead of the scheduler's).
const ParkedBehindHeader = "hookline-blocked-lane"

// MarkParkedBehind marks r, a parked record, as held behind a blocked
// head of lane key.
func MarkParkedBehind(r *kgo.Record, key string) {
	r.Headers = append(WithoutParkedBehind(r.Headers), kgo.RecordHeader{Key: ParkedBehindHeader, Value: []byte(key)})
}

// ParkedBehind returns the lane key r, a parked record, is held behind,
// and whether it is held behind a blocked head at all.
func ParkedBehind(r *kgo.Record) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == ParkedBehindHeader {
			return string(h.Value), true
		}
	}
	return "", false
}

// WithoutParkedBehind returns headers without the mark: a released
// record carries its parked record's headers on, and must not carry the
// mark into a later park of another kind.
func WithoutParkedBehind(headers []kgo.RecordHeader) []kgo.RecordHeader {
	if !slices.ContainsFunc(headers, func(h kgo.RecordHeader) bool { return h.Key == ParkedBehindHeader }) {
		return headers
	}
	return slices.DeleteFunc(slices.Clone(headers), func(h kgo.RecordHeader) bool { return h.Key == ParkedBehindHeader })
}
