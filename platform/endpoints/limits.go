package endpoints

// Ceilings on an endpoint's delivery limits: ingest refuses an endpoint
// asking for more, and they are the defaults of the dispatcher's
// --max-in-flight-ceiling and --rate-limit-ceiling (which cap what it
// honours, for endpoints written before these were enforced).
const (
	// MaxInFlightCeiling is the highest max_in_flight an endpoint may set.
	MaxInFlightCeiling = 1000
	// RateLimitCeiling is the highest rate_limit_per_second an endpoint
	// may set, in attempts per second.
	RateLimitCeiling = 100000
)
