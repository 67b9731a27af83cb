package history

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/sdk/ids"
	"google.golang.org/protobuf/proto"
)

// sweepBatch is how many entries one Sweep batch reads: Apply waits
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
func (s *Writer) Sweep(cutoff, deadCutoff time.Time) (deliveries, events int, err error) {
	keepDead := ids.Floor(ids.Delivery, deadCutoff)
	deliveries, err = s.sweepAll(tagStatus, ids.Floor(ids.Delivery, cutoff), func(b *pebble.Batch, tenant, id string, v []byte) (bool, error) {
		st := &hooklinev1.DeliveryStatus{}
		if err := decodeStatus(v, id, st); err != nil {
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
			if err := s.held.addSize(b, tenant, st.GetEndpointId(), id, -1); err != nil {
				return false, err
			}
		}
		errs := []error{
			b.Delete(key(tagStatus, tenant, id), nil),
			b.Delete(key(tagMeta, tenant, id), nil),
			b.DeleteRange(prefix(tagAttempt, tenant, id), upperBound(prefix(tagAttempt, tenant, id)), nil),
			b.Delete(key(tagEventDlv, tenant, st.GetEventId(), id), nil),
			b.Delete(key(tagByEndpoint, tenant, st.GetEndpointId(), id), nil),
			b.Delete(key(tagByType, tenant, st.GetEventType(), id), nil),
		}
		if stateIndexed(st.GetState()) {
			state := stateByte(int32(st.GetState()))
			errs = append(errs,
				b.Delete(key(tagByEpState, tenant, st.GetEndpointId(), state, id), nil),
				b.Delete(key(tagByState, tenant, state, id), nil))
		}
		return true, errors.Join(errs...)
	})
	if err != nil {
		return deliveries, 0, err
	}
	keepEvent := ids.Floor(ids.Event, deadCutoff)
	events, err = s.sweepAll(tagEvent, ids.Floor(ids.Event, cutoff), func(b *pebble.Batch, tenant, id string, v []byte) (bool, error) {
		if id >= keepEvent {
			left := false
			err := scan(s.db, prefix(tagEventDlv, tenant, id), nil, func(_, _ []byte) (bool, error) {
				left = true
				return false, nil
			})
			if err != nil || left {
				return false, err // a dead letter still needs its payload
			}
		}
		ev := &hooklinev1.GetEventResponse{}
		if err := proto.Unmarshal(v, ev); err != nil {
			return false, fmt.Errorf("history: decode event: %w", err)
		}
		return true, errors.Join(
			b.Delete(key(tagEvent, tenant, id), nil),
			b.Delete(key(tagEvByType, tenant, ev.GetEventType(), id), nil),
		)
	})
	return deliveries, events, err
}

// sweepAll walks, tenant by tenant, the entries of tag (the summaries or
// the events: keyed tenant, id) whose id is below the id below, in
// batches, calling drop with each entry's tenant, id and value; drop
// adds the deletions of what the entry names and says whether it did.
// It returns how many it deleted.
func (s *Writer) sweepAll(tag, below string, drop func(b *pebble.Batch, tenant, id string, v []byte) (bool, error)) (int, error) {
	deleted := 0
	var after *string
	for {
		tenant, ok, err := s.firstTenant(tag, after)
		if err != nil || !ok {
			return deleted, err
		}
		after = &tenant
		p := prefix(tag, tenant)
		from := p
		for {
			scanned, n, last, err := s.sweepOnce(tenant, p, from, append(bytes.Clone(p), below...), drop)
			deleted += n
			if err != nil {
				return deleted, err
			}
			if scanned < sweepBatch {
				break
			}
			from = append(last, 0) // go on after the last entry read
		}
	}
}

// firstTenant returns the first tenant with an entry of tag (keyed
// tenant, id), after the tenant after when it is given: a seek per
// tenant, whatever its entries.
func (s *Writer) firstTenant(tag string, after *string) (string, bool, error) {
	p := prefix(tag)
	lo := p
	if after != nil {
		lo = append(append(bytes.Clone(p), *after...), 1) // above every key of after
	}
	tenant, found := "", false
	err := scan(s.db, lo, upperBound(p), func(k, _ []byte) (bool, error) {
		tenant, _, _ = cutPart(k[len(p):])
		found = true
		return false, nil
	})
	return tenant, found, err
}

// sweepOnce reads up to sweepBatch of the tenant's entries under p from
// the key from up to the key below, and deletes in one batch those drop
// says to. It returns how many it read and deleted, and the last key.
func (s *Writer) sweepOnce(tenant string, p, from, below []byte, drop func(b *pebble.Batch, tenant, id string, v []byte) (bool, error)) (scanned, deleted int, last []byte, err error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	clear(s.held)
	b := s.db.NewIndexedBatch() // an endpoint's unended bytes change once per delivery dropped
	defer b.Close()
	err = scan(s.db, from, below, func(k, v []byte) (bool, error) {
		scanned++
		last = bytes.Clone(k)
		gone, err := drop(b, tenant, string(k[len(p):]), v)
		if err != nil {
			return false, err
		}
		if gone {
			deleted++
		}
		return scanned < sweepBatch, nil
	})
	if err == nil {
		err = s.held.flush(b)
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
