package idempotency

import (
	"bytes"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/sdk/ids"
)

// Claim is the winning claim of one key, as the view keeps it: without
// what grows with its fan-out (its endpoints, or the delivery refs of a
// claim written before endpoint_ids), which stays in the claim's record
// on the topic, named by Ref and read back when needed. A
// claim then costs a few hundred bytes per ingest for twice the TTL,
// whatever its fan-out.
type Claim struct {
	Rec       *hooklinev1.IdempotencyRecord
	Ref       *hooklinev1.RecordRef // where the whole record is on the topic
	Committed bool                  // its deliveries are durable
}

// HashVersion starts the request hash of a claim that carries
// endpoint_ids instead of delivery refs. An ingest from before compares
// the whole hash, so it answers a repeat of such a claim
// INVALID_ARGUMENT instead of with no deliveries, and never completes it.
const HashVersion = 2

// SameRequest reports whether a claim's stored request hash is hash:
// bare (a claim from before endpoint_ids) or versioned.
func SameRequest(stored, hash []byte) bool {
	if len(stored) == len(hash)+1 && stored[0] == HashVersion {
		stored = stored[1:]
	}
	return bytes.Equal(stored, hash)
}

// Deliveries returns the deliveries full (a whole claim record)
// fans out to, in its response's order: the refs of a claim from before
// endpoint_ids, else one per endpoint with the id derived from the event
// id and the endpoint id.
func Deliveries(full *hooklinev1.IdempotencyRecord) []*hooklinev1.DeliveryRef {
	if len(full.GetDeliveries()) > 0 {
		return full.GetDeliveries()
	}
	out := make([]*hooklinev1.DeliveryRef, len(full.GetEndpointIds()))
	for i, ep := range full.GetEndpointIds() {
		out[i] = &hooklinev1.DeliveryRef{DeliveryId: DeliveryID(full, ep), EndpointId: ep}
	}
	return out
}

// DeliveryID is the id of claim c's delivery to endpoint: at the
// claim's time, from its event id and the endpoint id.
func DeliveryID(c *hooklinev1.IdempotencyRecord, endpoint string) string {
	return ids.Derive(ids.Delivery, c.GetCreatedAt().AsTime(), c.GetEventId(), endpoint)
}
