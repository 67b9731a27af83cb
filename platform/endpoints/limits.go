package endpoints

import "time"

// Ceilings (and a floor) on an endpoint's delivery limits: ingest refuses an endpoint
// asking for more, and they are the defaults of the dispatcher's
// --max-in-flight-ceiling and --rate-limit-ceiling (which cap what it
// honours, for endpoints written before these were enforced).
const (
	// MaxInFlightCeiling is the highest max_in_flight an endpoint may set.
	MaxInFlightCeiling = 1000
	// RateLimitCeiling is the highest rate_limit_per_second an endpoint
	// may set, in attempts per second.
	RateLimitCeiling = 100000
	// RateLimitFloor is the lowest positive rate_limit_per_second an
	// endpoint may set (one attempt every 1000 s): below it the spacing
	// of attempts does not fit a time.Duration (1e-12/s is 3e4 years),
	// and such a rate means "never", which is what pausing is for. The
	// dispatcher honours a record below it at the floor.
	RateLimitFloor = 0.001
)

// Bounds and defaults of an endpoint's batch settings (issue 30): ingest
// refuses settings outside them, and the dispatcher clamps a record
// written before they were enforced to them.
const (
	// MinBatchEvents and MaxBatchEvents bound batch.max_events.
	MinBatchEvents = 2
	MaxBatchEvents = 1000
	// DefaultBatchBytes is batch.max_bytes when it is 0; MaxBatchBytes
	// its bound: a batch's retry record carries its body, and every
	// record stays within the topics' 8 MiB limit.
	DefaultBatchBytes = 1 << 20
	MaxBatchBytes     = 4 << 20
	// DefaultBatchWait is batch.max_wait when it is unset; MaxBatchWait
	// its bound: a waiting member holds its partition's committed offset.
	DefaultBatchWait = time.Second
	MaxBatchWait     = 5 * time.Second
)
