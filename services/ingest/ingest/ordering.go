package ingest

import (
	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
)

// maxOrderingKeyLen bounds PublishEventRequest.ordering_key.
const maxOrderingKeyLen = 128

// validateOrdering checks an endpoint's ordering mode.
func validateOrdering(o hooklinev1.Ordering) error {
	if _, ok := hooklinev1.Ordering_name[int32(o)]; !ok {
		return invalid("ordering", "%d is not a mode; use ORDERING_UNORDERED, ORDERING_PER_ENDPOINT or ORDERING_PER_KEY", o)
	}
	return nil
}

// validateHeadFailure checks on_head_failure.
func validateHeadFailure(h hooklinev1.HeadFailure) error {
	if _, ok := hooklinev1.HeadFailure_name[int32(h)]; !ok {
		return invalid("on_head_failure", "%d is not a choice; use HEAD_FAILURE_SKIP or HEAD_FAILURE_BLOCK", h)
	}
	return nil
}

// validateOrderingKey checks a publish's ordering key: at most
// maxOrderingKeyLen bytes of printable ASCII. A key is accepted for any
// endpoint; only endpoints ordered per key use it.
func validateOrderingKey(k string) error {
	if len(k) > maxOrderingKeyLen {
		return invalid("ordering_key", "is %d bytes, the limit is %d", len(k), maxOrderingKeyLen)
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 0x20 || c > 0x7e {
			return invalid("ordering_key", "byte %d is %#x; use printable ASCII (0x20-0x7e)", i, c)
		}
	}
	return nil
}
