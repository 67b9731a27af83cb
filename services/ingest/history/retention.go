package history

import (
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/ids"
)

// sweepBatch is how many deliveries or events one Sweep batch deletes:
// Apply waits at most one batch.
const sweepBatch = 1000

// Sweep deletes every delivery and event created before cutoff, with
// its attempts, payload and index entries, and returns how many of each
// it deleted. Ids sort by creation time, so it reads only what it
// deletes. It runs in batches of sweepBatch between which Apply may run.
func (s *Store) Sweep(cutoff time.Time) (deliveries, events int, err error) {
	for {
		n, err := s.sweepDeliveries(ids.Floor(ids.Delivery, cutoff))
		deliveries += n
		if err != nil {
			return deliveries, events, err
		}
		if n < sweepBatch {
			break
		}
	}
	for {
		n, err := s.sweepEvents(ids.Floor(ids.Event, cutoff))
		events += n
		if err != nil || n < sweepBatch {
			return deliveries, events, err
		}
	}
}

func (s *Store) sweepDeliveries(below string) (int, error) {
	return s.sweepAge(tagAgeDlv, below, func(b *pebble.Batch, id, tenant string) error {
		st := &hooklinev1.DeliveryStatus{}
		if _, err := getProto(s.db, key(tagStatus, tenant, id), st); err != nil {
			return err
		}
		state := stateByte(int32(st.GetState()))
		return errors.Join(
			b.Delete(key(tagStatus, tenant, id), nil),
			b.Delete(key(tagMeta, tenant, id), nil),
			b.DeleteRange(prefix(tagAttempt, tenant, id), upperBound(prefix(tagAttempt, tenant, id)), nil),
			b.Delete(key(tagEventDlv, tenant, st.GetEventId(), id), nil),
			b.Delete(key(tagByEndpoint, tenant, st.GetEndpointId(), id), nil),
			b.Delete(key(tagByEpState, tenant, st.GetEndpointId(), state, id), nil),
			b.Delete(key(tagByType, tenant, st.GetEventType(), id), nil),
			b.Delete(key(tagByState, tenant, state, id), nil),
		)
	})
}

func (s *Store) sweepEvents(below string) (int, error) {
	return s.sweepAge(tagAgeEvent, below, func(b *pebble.Batch, id, tenant string) error {
		ev := &hooklinev1.GetEventResponse{}
		if _, err := getProto(s.db, key(tagEvent, tenant, id), ev); err != nil {
			return err
		}
		return errors.Join(
			b.Delete(key(tagEvent, tenant, id), nil),
			b.Delete(key(tagEvByType, tenant, ev.GetEventType(), id), nil),
		)
	})
}

// sweepAge deletes, in one batch, up to sweepBatch entries of the age
// index tag whose id sorts below below: drop adds the deletions of what
// the entry names, sweepAge the entry itself.
func (s *Store) sweepAge(tag, below string, drop func(b *pebble.Batch, id, tenant string) error) (int, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	n := 0
	p := prefix(tag)
	err := s.scan(p, key(tag, below), func(k, _ []byte) (bool, error) {
		id, tenant, _ := cutPart(k[len(p):])
		if err := drop(b, id, tenant); err != nil {
			return false, err
		}
		n++
		return n < sweepBatch, b.Delete(k, nil)
	})
	if err != nil {
		return n, fmt.Errorf("history: sweep: %w", err)
	}
	return n, commit(b)
}

func commit(b *pebble.Batch) error {
	if b.Empty() {
		return nil
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("history: sweep: %w", err)
	}
	return nil
}

// cutPart splits k at its first NUL.
func cutPart(k []byte) (string, string, bool) {
	for i, c := range k {
		if c == 0 {
			return string(k[:i]), string(k[i+1:]), true
		}
	}
	return string(k), "", false
}
