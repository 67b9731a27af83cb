package history

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
)

// Unended bytes: per endpoint, the payload bytes of its deliveries that
// have not reached a terminal state (docs/DESIGN.md, "Held bytes"). A
// delivery's payload size is kept in its by-endpoint entry (lp) from the
// first record that carries the payload; the endpoint's sum (hb) counts
// it while the delivery is unended: from that record, until a terminal
// result or the sweep, again if a resend or recover makes it unended
// again. The sums change once per batch (heldDelta.flush), in the batch that
// changes the deliveries, with that batch's offsets, so they are exact
// for the records applied, and applying a record again changes nothing
// (a size already known is not counted again; a result already applied
// is skipped).

// heldDelta is what the batch being written adds to each endpoint's
// unended bytes (by hb key), written once per batch (flush). The
// Writer's, guarded by its writeMu.
type heldDelta map[string]int64

// ended reports whether a delivery in state st has its terminal outcome.
func ended(st hooklinev1.DeliveryState) bool {
	switch st {
	case hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED, hooklinev1.DeliveryState_DELIVERY_STATE_FAILED,
		hooklinev1.DeliveryState_DELIVERY_STATE_EXPIRED, hooklinev1.DeliveryState_DELIVERY_STATE_ENDPOINT_DELETED,
		hooklinev1.DeliveryState_DELIVERY_STATE_CANCELLED:
		return true
	}
	return false
}

// sized records that w's payload is size bytes, if the index did not
// know it (a record carrying the payload read after its result, or a
// new row: save stored it), and counts them while w is unended.
func (h *heldDelta) sized(b *pebble.Batch, w *row, size int64) error {
	if size <= 0 {
		return nil
	}
	if !w.isNew {
		k := key(tagByEndpoint, w.tenant, w.status.GetEndpointId(), w.id)
		known, _, err := getInt(b, k)
		if err != nil || known > 0 {
			return err
		}
		if err := b.Set(k, sizeValue(size), nil); err != nil {
			return fmt.Errorf("history: %w", err)
		}
	}
	if !ended(w.status.GetState()) {
		h.add(w.tenant, w.status.GetEndpointId(), size)
	}
	return nil
}

// endedChanged counts w's payload again (it is unended again: resent or
// recovered) or no longer (it ended).
func (h *heldDelta) endedChanged(b getter, w *row) error {
	sign := int64(1)
	if ended(w.status.GetState()) {
		sign = -1
	}
	return h.addSize(b, w.tenant, w.status.GetEndpointId(), w.id, sign)
}

// addSize adds sign × the payload bytes the index knows of delivery id
// to its endpoint's unended bytes.
func (h *heldDelta) addSize(b getter, tenant, endpoint, id string, sign int64) error {
	n, _, err := getInt(b, key(tagByEndpoint, tenant, endpoint, id))
	if err != nil {
		return err
	}
	if n > 0 {
		h.add(tenant, endpoint, sign*n)
	}
	return nil
}

// add adds n to the endpoint's unended bytes in the batch being
// written. Called with writeMu held.
func (h *heldDelta) add(tenant, endpoint string, n int64) {
	if *h == nil {
		*h = heldDelta{}
	}
	(*h)[string(key(tagHeldBytes, tenant, endpoint))] += n
}

// flush writes the batch's changes to unended bytes into b (an entry
// at 0 or below is deleted). Called with writeMu held.
func (h *heldDelta) flush(b *pebble.Batch) error {
	defer clear(*h)
	for k, d := range *h {
		if d == 0 {
			continue
		}
		cur, _, err := getInt(b, []byte(k))
		if err != nil {
			return err
		}
		if cur += d; cur <= 0 {
			err = b.Delete([]byte(k), nil)
		} else {
			err = b.Set([]byte(k), sizeValue(cur), nil)
		}
		if err != nil {
			return fmt.Errorf("history: %w", err)
		}
	}
	return nil
}

// sizeValue encodes n (nil for 0: an index entry with no size known).
func sizeValue(n int64) []byte {
	if n <= 0 {
		return nil
	}
	return binary.BigEndian.AppendUint64(nil, uint64(n))
}

// Unended returns, read from one consistent state of the index, the
// unended payload bytes of each of tenant's endpoints (by id; endpoints
// with none are left out) and, per partition of the deliveries topic,
// the next offset that state has not applied: every delivery record
// below it is counted, none at or above it.
func (s *Reader) Unended(tenant string, endpoints []string) (map[string]int64, map[int32]int64, error) {
	snap := s.db.NewSnapshot()
	defer snap.Close()
	bytes := map[string]int64{}
	for _, ep := range endpoints {
		n, found, err := getInt(snap, key(tagHeldBytes, tenant, ep))
		if err != nil {
			return nil, nil, err
		}
		if found {
			bytes[ep] = n
		}
	}
	lo := prefix(tagOffset, s.topics.Deliveries)
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: upperBound(lo)})
	if err != nil {
		return nil, nil, fmt.Errorf("history: offsets: %w", err)
	}
	defer it.Close()
	applied := map[int32]int64{}
	for it.First(); it.Valid(); it.Next() {
		k, v := it.Key(), it.Value()
		if len(k) != len(lo)+4 || len(v) != 8 {
			continue // another topic whose name extends this one's
		}
		applied[int32(binary.BigEndian.Uint32(k[len(lo):]))] = int64(binary.BigEndian.Uint64(v))
	}
	return bytes, applied, it.Error()
}

func getInt(b getter, k []byte) (int64, bool, error) {
	v, closer, err := b.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("history: read %q: %w", k, err)
	}
	defer closer.Close()
	if len(v) == 0 {
		return 0, true, nil // an entry with no number
	}
	if len(v) != 8 {
		return 0, false, fmt.Errorf("history: %q holds %d bytes, want 8", k, len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), true, nil
}
