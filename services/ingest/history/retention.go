package history

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/sdk/ids"
)

// sweepBatch is how many age entries one Sweep batch reads: Apply waits
// at most one batch.
const sweepBatch = 1000

// Sweep deletes what the topics no longer hold: every delivery created
// before cutoff (the deliveries and results topics' retention), except
// dead-lettered ones (FAILED or EXPIRED), which the dead-letter topic
// keeps until deadCutoff; and every event created before cutoff that has
// no delivery left, or before deadCutoff. Attempts, payloads and index
// entries go with them. It returns how many deliveries and events it
// deleted. Ids sort by creation time, so it reads only entries older
// than cutoff. It runs in batches of sweepBatch between which Apply may
// run.
func (s *Store) Sweep(cutoff, deadCutoff time.Time) (deliveries, events int, err error) {
	keepDead := ids.Floor(ids.Delivery, deadCutoff)
	deliveries, err = s.sweepAll(tagAgeDlv, ids.Floor(ids.Delivery, cutoff), func(b *pebble.Batch, id, tenant string) (bool, error) {
		st := &hooklinev1.DeliveryStatus{}
		if _, err := getProto(s.db, key(tagStatus, tenant, id), st); err != nil {
			return false, err
		}
		switch st.GetState() {
		case hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, hooklinev1.DeliveryState_DELIVERY_STATE_EXPIRED:
			if id >= keepDead {
				return false, nil // its dead letter is still in Kafka
			}
		}
		if !ended(st.GetState()) {
			// Unended, and older than the topics keep it: it no longer counts.
			if err := s.addSize(b, tenant, st.GetEndpointId(), id, -1); err != nil {
				return false, err
			}
		}
		state := stateByte(int32(st.GetState()))
		return true, errors.Join(
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
	if err != nil {
		return deliveries, 0, err
	}
	keepEvent := ids.Floor(ids.Event, deadCutoff)
	events, err = s.sweepAll(tagAgeEvent, ids.Floor(ids.Event, cutoff), func(b *pebble.Batch, id, tenant string) (bool, error) {
		if id >= keepEvent {
			left := false
			err := s.scan(prefix(tagEventDlv, tenant, id), nil, func(_, _ []byte) (bool, error) {
				left = true
				return false, nil
			})
			if err != nil || left {
				return false, err // a dead letter still needs its payload
			}
		}
		ev := &hooklinev1.GetEventResponse{}
		if _, err := getProto(s.db, key(tagEvent, tenant, id), ev); err != nil {
			return false, err
		}
		return true, errors.Join(
			b.Delete(key(tagEvent, tenant, id), nil),
			b.Delete(key(tagEvByType, tenant, ev.GetEventType(), id), nil),
		)
	})
	return deliveries, events, err
}

// sweepAll walks the age index tag below the id below in batches,
// deleting each entry drop says to (drop adds the deletions of what the
// entry names), and returns how many it deleted.
func (s *Store) sweepAll(tag, below string, drop func(b *pebble.Batch, id, tenant string) (bool, error)) (int, error) {
	from, deleted := prefix(tag), 0
	for {
		scanned, n, last, err := s.sweepOnce(tag, from, below, drop)
		deleted += n
		if err != nil || scanned < sweepBatch {
			return deleted, err
		}
		from = append(last, 0) // go on after the last entry read
	}
}

// sweepOnce reads up to sweepBatch entries of the age index tag from
// the key from up to the id below, and deletes in one batch those drop
// says to. It returns how many it read and deleted, and the last key.
func (s *Store) sweepOnce(tag string, from []byte, below string, drop func(b *pebble.Batch, id, tenant string) (bool, error)) (scanned, deleted int, last []byte, err error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	clear(s.heldDelta)
	b := s.db.NewIndexedBatch() // an endpoint's unended bytes change once per delivery dropped
	defer b.Close()
	p := prefix(tag)
	err = s.scan(from, key(tag, below), func(k, _ []byte) (bool, error) {
		scanned++
		last = bytes.Clone(k)
		id, tenant, _ := cutPart(k[len(p):])
		gone, err := drop(b, id, tenant)
		if err != nil {
			return false, err
		}
		if gone {
			deleted++
			if err := b.Delete(k, nil); err != nil {
				return false, err
			}
		}
		return scanned < sweepBatch, nil
	})
	if err == nil {
		err = s.flushHeld(b)
	}
	if err != nil {
		return scanned, deleted, last, fmt.Errorf("history: sweep: %w", err)
	}
	return scanned, deleted, last, commit(b)
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
