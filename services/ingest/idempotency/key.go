package idempotency

import (
	"crypto/sha256"
	"encoding/binary"
	"maps"
	"slices"
	"strconv"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
)

// RecordKey is the Kafka key of tenant's idempotency key: length
// prefixed, so no tenant/key pair collides with another.
func RecordKey(tenant, key string) string {
	return strconv.Itoa(len(tenant)) + ":" + tenant + ":" + key
}

// RequestHash identifies what a publish asks for: the event type, the
// payload, the sorted, deduplicated endpoint ids, the ordering key
// (when set) and the metadata (when set, sorted by key; endpoints'
// content filters read it), each length-prefixed.
// Two requests with the same hash are the same request for an idempotency
// key. It is safe for concurrent use.
func RequestHash(req *hooklinev1.PublishEventRequest) []byte {
	h := sha256.New()
	write := func(b []byte) {
		_ = binary.Write(h, binary.BigEndian, uint64(len(b)))
		h.Write(b)
	}
	write([]byte(req.GetEventType()))
	write(req.GetPayload())
	named := slices.Clone(req.GetEndpointIds())
	slices.Sort(named)
	named = slices.Compact(named)
	_ = binary.Write(h, binary.BigEndian, uint64(len(named)))
	for _, id := range named {
		write([]byte(id))
	}
	if k := req.GetOrderingKey(); k != "" {
		// Only when set, so hashes of claims made before ordering keys
		// existed are unchanged.
		write([]byte(k))
	}
	if md := req.GetMetadata(); len(md) > 0 {
		// Only when set, as the ordering key; the tag keeps a request
		// with metadata apart from one whose ordering key looks alike.
		write([]byte("metadata"))
		_ = binary.Write(h, binary.BigEndian, uint64(len(md)))
		for _, k := range slices.Sorted(maps.Keys(md)) {
			write([]byte(k))
			write([]byte(md[k]))
		}
	}
	return h.Sum(nil)
}
