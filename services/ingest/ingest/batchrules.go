package ingest

// The rules of an endpoint's batch settings (issue 30): CreateEndpoint
// and UpdateEndpoint check the endpoint as it would be written.

import (
	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/endpoints"
)

// Bounds of BatchSettings: platform/endpoints (limits.go), which the
// dispatcher clamps to as well.
const (
	minBatchEvents = endpoints.MinBatchEvents
	maxBatchEvents = endpoints.MaxBatchEvents
	maxBatchBytes  = endpoints.MaxBatchBytes
	maxBatchWait   = endpoints.MaxBatchWait
)

// checkBatch checks ep's batch settings, if any, and that the endpoint
// is not ordered: the dispatcher does not batch ordered lanes yet.
func checkBatch(ep *hooklinev1.Endpoint) error {
	b := ep.GetBatch()
	if b == nil {
		return nil
	}
	if n := b.GetMaxEvents(); n < minBatchEvents || n > maxBatchEvents {
		return invalid("batch.max_events", "must be %d to %d, got %d (to turn batching off, unset batch)", minBatchEvents, maxBatchEvents, n)
	}
	if n := b.GetMaxBytes(); n > maxBatchBytes {
		return invalid("batch.max_bytes", "must be at most %d (4 MiB), got %d; 0 means 1 MiB", maxBatchBytes, n)
	}
	if w := b.GetMaxWait(); w != nil {
		if err := w.CheckValid(); err != nil {
			return invalid("batch.max_wait", "%v", err)
		}
		if d := w.AsDuration(); d < 0 || d > maxBatchWait {
			return invalid("batch.max_wait", "must be 0 to %v, got %v; unset means 1s, 0 sends what is waiting at once", maxBatchWait, d)
		}
	}
	switch ep.GetOrdering() {
	case hooklinev1.Ordering_ORDERING_PER_ENDPOINT, hooklinev1.Ordering_ORDERING_PER_KEY:
		return invalid("batch", "batching ordered endpoints is not built yet; unset ordering or batch")
	}
	return nil
}

// setBatchField sets the one batch setting path names ("batch.max_events",
// "batch.max_bytes" or "batch.max_wait") from in, keeping ep's others.
func setBatchField(ep *hooklinev1.Endpoint, path string, in *hooklinev1.BatchSettings) {
	if ep.Batch == nil {
		ep.Batch = &hooklinev1.BatchSettings{}
	}
	switch path {
	case "batch.max_events":
		ep.Batch.MaxEvents = in.GetMaxEvents()
	case "batch.max_bytes":
		ep.Batch.MaxBytes = in.GetMaxBytes()
	case "batch.max_wait":
		ep.Batch.MaxWait = in.GetMaxWait()
	}
}
