package history

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
)

// maxBatchBytes bounds one Pebble batch of Apply (1 MiB): a poll larger than
// that (a fetch of well-compressed records can decompress to tens of
// MiB) is written in several batches, so what a batch holds in memory
// stays bounded whatever the poll.
const maxBatchBytes = 1 << 20

// Writer is the index's write side: Apply materialises the topics'
// records, Sweep (retention.go) deletes what they no longer hold. Apply
// and Sweep write one at a time.
type Writer struct {
	db     *pebble.DB
	topics Topics
	// maxBatch is maxBatchBytes; tests lower it.
	maxBatch int
	// committed, when set (tests), sees each batch Apply commits: its
	// size and the offsets it stored.
	committed func(bytes int, offsets hkafka.Offsets)

	// writeMu serialises Apply and Sweep: both read a delivery's summary
	// before changing its index entries.
	writeMu sync.Mutex
	// held is what the batch being written adds to each endpoint's
	// unended bytes (heldbytes.go). Guarded by writeMu.
	held heldDelta
	// applied is, per topic partition, the next offset Apply has not
	// applied: the offsets stored with the last committed batch (loaded
	// by the first Apply, kept by commitAt). A record below it may have been
	// applied before (a re-read); one at or above it cannot have been,
	// since a batch stores its records and the offsets they reach
	// together. Guarded by writeMu; nil until the first Apply.
	applied map[hkafka.TopicPartition]int64
}

// Apply writes recs (one poll of the deliveries, results and dead-letter
// topics, in offset order per partition) and next, the offsets they
// reach. Each Pebble batch it commits stores, atomically with its
// records, the offsets those records reach: after a crash the index
// holds a batch whole with its offsets or not at all, so resuming from
// Offsets neither skips nor doubles a record (and applying a record
// twice changes nothing). A batch is committed once it holds
// s.maxBatch bytes, and at the end with next. It has the signature of
// hkafka.BatchApply.
func (s *Writer) Apply(recs []*kgo.Record, next hkafka.Offsets) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.loadApplied(); err != nil {
		return err
	}
	clear(s.held) // what a batch that failed before its commit left
	b := s.db.NewIndexedBatch()
	defer func() { _ = b.Close() }()
	reached := hkafka.Offsets{} // by the records in b
	seen := eventsSeen{}        // what this call wrote (or found) of each event
	for _, r := range recs {
		if err := s.applyOne(b, seen, r); err != nil {
			return err
		}
		ps := reached[r.Topic]
		if ps == nil {
			ps = map[int32]int64{}
			reached[r.Topic] = ps
		}
		ps[r.Partition] = r.Offset + 1
		if b.Len() >= s.maxBatch {
			if err := s.commitAt(b, reached); err != nil {
				return err
			}
			_ = b.Close()
			b = s.db.NewIndexedBatch()
			clear(reached)
		}
	}
	return s.commitAt(b, next)
}

// commitAt stores the offsets with b's records and commits b. Without a
// write-ahead log (see Open) a commit only fills the memtable.
func (s *Writer) commitAt(b *pebble.Batch, offsets hkafka.Offsets) error {
	for t, ps := range offsets {
		for p, o := range ps {
			if err := b.Set(offsetKey(t, p), binary.BigEndian.AppendUint64(nil, uint64(o)), nil); err != nil {
				return fmt.Errorf("history: %w", err)
			}
		}
	}
	if err := s.held.flush(b); err != nil {
		return err
	}
	if s.committed != nil {
		s.committed(b.Len(), offsets)
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("history: commit: %w", err)
	}
	s.noteApplied(offsets)
	return nil
}

// loadApplied reads the stored offsets into applied the first time an
// Apply needs them (writeMu held): not at Open, whose caller may Warm
// the tables first.
func (s *Writer) loadApplied() error {
	if s.applied != nil {
		return nil
	}
	offsets, err := storedOffsets(s.db)
	if err != nil {
		return err
	}
	s.applied = map[hkafka.TopicPartition]int64{}
	s.noteApplied(offsets)
	return nil
}

// noteApplied records offsets as applied (writeMu held).
func (s *Writer) noteApplied(offsets hkafka.Offsets) {
	for t, ps := range offsets {
		for p, o := range ps {
			s.applied[hkafka.TopicPartition{Topic: t, Partition: p}] = o
		}
	}
}

// mayHaveApplied reports whether the record at offset of topic's
// partition p may have been applied before (writeMu held).
func (s *Writer) mayHaveApplied(topic string, p int32, offset int64) bool {
	return offset < s.applied[hkafka.TopicPartition{Topic: topic, Partition: p}]
}

// eventsSeen remembers, for one Apply, the events already stored, by
// event key: true once the event's payload is stored. A fan-out's
// records carry the same event, and each used to look it up again (a
// read through the batch, the memtables and the tables' filters); only
// the first needs to. One Apply at a time writes (writeMu), so nothing
// changes an event behind the map.
type eventsSeen map[string]bool

func (s *Writer) applyOne(b *pebble.Batch, seen eventsSeen, r *kgo.Record) error {
	switch r.Topic {
	case s.topics.Deliveries:
		var d hooklinev1.Delivery
		// A lane command names a delivery but is not one (LaneService);
		// nor is a batch's record (a retry the scheduler released): its
		// members are the deliveries, indexed from their own records, and
		// each gets its own result of the batch's attempts (batch_id set).
		if hkafka.Decode(r, &d) == nil && d.GetDeliveryId() != "" && d.GetKind() != hooklinev1.DeliveryKind_DELIVERY_KIND_LANE_COMMAND && d.GetBatch() == nil {
			return s.putDelivery(b, seen, &d)
		}
	case s.topics.Dead:
		var dl hooklinev1.DeadLetter
		// Poison records (raw, undecodable input) carry no delivery. A
		// batch's members are dead-lettered one by one; a letter that
		// carried the batch itself would index no delivery of the tenant's.
		if hkafka.Decode(r, &dl) == nil && dl.GetDelivery().GetDeliveryId() != "" && dl.GetDelivery().GetBatch() == nil {
			return s.putDelivery(b, seen, dl.GetDelivery())
		}
	case s.topics.Results:
		var res hooklinev1.AttemptResult
		if hkafka.Decode(r, &res) == nil && res.GetDeliveryId() != "" {
			return s.putResult(b, seen, &res, r.Partition, r.Offset)
		}
	}
	return nil
}

// row is what the index knows of one delivery while a batch changes it.
type row struct {
	tenant, id string
	status     *hooklinev1.DeliveryStatus
	isNew      bool
	size       int64 // of a new row: its payload bytes, when the record carries it
}

// loadRow reads the delivery's summary (through the batch), or starts
// one from what the record says.
func loadRow(b *pebble.Batch, tenant, id, eventID, endpoint, typ string) (*row, error) {
	st := &hooklinev1.DeliveryStatus{}
	found, err := getStatus(b, tenant, id, st)
	if err != nil {
		return nil, err
	}
	if !found {
		st = &hooklinev1.DeliveryStatus{
			DeliveryId: id, EventId: eventID, EndpointId: endpoint, EventType: typ,
			State: hooklinev1.DeliveryState_DELIVERY_STATE_PENDING,
		}
	}
	return &row{tenant: tenant, id: id, status: st, isNew: !found}, nil
}

// save writes the summary and, for a new delivery or a changed state,
// the index entries that name it (DELIVERED has no state entries).
func (w *row) save(b *pebble.Batch, oldState hooklinev1.DeliveryState) error {
	st := w.status
	var errs []error
	set := func(k, v []byte) { errs = append(errs, b.Set(k, v, nil)) }
	del := func(k []byte) { errs = append(errs, b.Delete(k, nil)) }
	errs = append(errs, setStatus(b, key(tagStatus, w.tenant, w.id), st))
	if w.isNew {
		set(key(tagEventDlv, w.tenant, st.GetEventId(), w.id), nil)
		set(key(tagByEndpoint, w.tenant, st.GetEndpointId(), w.id), sizeValue(w.size))
		set(key(tagByType, w.tenant, st.GetEventType(), w.id), nil)
	} else if oldState != st.GetState() && stateIndexed(oldState) {
		del(key(tagByState, w.tenant, stateByte(int32(oldState)), w.id))
		del(key(tagByEpState, w.tenant, st.GetEndpointId(), stateByte(int32(oldState)), w.id))
	}
	if (w.isNew || oldState != st.GetState()) && stateIndexed(st.GetState()) {
		set(key(tagByState, w.tenant, stateByte(int32(st.GetState())), w.id), nil)
		set(key(tagByEpState, w.tenant, st.GetEndpointId(), stateByte(int32(st.GetState())), w.id), nil)
	}
	return errors.Join(errs...)
}

func (s *Writer) putDelivery(b *pebble.Batch, seen eventsSeen, d *hooklinev1.Delivery) error {
	tenant, id := d.GetTenantId(), d.GetDeliveryId()
	w, err := loadRow(b, tenant, id, d.GetEventId(), d.GetEndpointId(), d.GetEventType())
	if err != nil {
		return err
	}
	old := w.status.GetState()
	if w.status.GetCreatedAt() == nil {
		w.status.CreatedAt = d.GetCreatedAt()
	}
	size := int64(len(d.GetPayload()))
	if w.isNew {
		w.size = size
	}
	if err := w.save(b, old); err != nil {
		return err
	}
	if err := s.held.sized(b, w, size); err != nil {
		return err
	}
	if err := putEvent(b, seen, tenant, d.GetEventId(), d.GetEventType(), d); err != nil {
		return err
	}
	// The latest record, for a resend; the payload lives with the event.
	return setRecord(b, key(tagMeta, tenant, id), d)
}

// putEvent records the event once, and its payload the first time a
// record carrying it is seen (d nil: a result, no payload).
func putEvent(b *pebble.Batch, seen eventsSeen, tenant, eventID, typ string, d *hooklinev1.Delivery) error {
	k := key(tagEvent, tenant, eventID)
	if withPayload, ok := seen[string(k)]; ok && (withPayload || d.GetPayload() == nil) {
		return nil
	}
	ev := &hooklinev1.GetEventResponse{}
	found, err := getEvent(b, tenant, eventID, ev)
	if err != nil {
		return err
	}
	if found && (ev.GetPayload() != nil || d.GetPayload() == nil) {
		seen[string(k)] = ev.GetPayload() != nil
		return nil
	}
	if !found {
		ev = &hooklinev1.GetEventResponse{EventId: eventID, EventType: typ}
		if err := b.Set(key(tagEvByType, tenant, typ, eventID), nil, nil); err != nil {
			return fmt.Errorf("history: %w", err)
		}
	}
	if d.GetPayload() != nil {
		ev.Payload, ev.CreatedAt = d.GetPayload(), d.GetCreatedAt()
	}
	if err := setEvent(b, k, ev); err != nil {
		return err
	}
	seen[string(k)] = ev.GetPayload() != nil
	return nil
}

func (s *Writer) putResult(b *pebble.Batch, seen eventsSeen, res *hooklinev1.AttemptResult, partition int32, offset int64) error {
	tenant, id := res.GetTenantId(), res.GetDeliveryId()
	ak := attemptKey(tenant, id, partition, offset)
	// Only a record below the applied offset can have been applied (a
	// re-read): the look-up was a tenth of the index's CPU when made for
	// every result, nearly all of them new.
	if s.mayHaveApplied(s.topics.Results, partition, offset) {
		if _, closer, err := b.Get(ak); err == nil {
			_ = closer.Close()
			return nil // applied before
		} else if !errors.Is(err, pebble.ErrNotFound) {
			return fmt.Errorf("history: %w", err)
		}
	}
	w, err := loadRow(b, tenant, id, res.GetEventId(), res.GetEndpointId(), res.GetEventType())
	if err != nil {
		return err
	}
	old := w.status.GetState()
	st := w.status
	if res.GetAttempt() > 0 {
		st.Attempts++
	}
	st.State = res.GetState()
	st.UpdatedAt = res.GetStartedAt()
	st.NextAttemptAt = res.GetNextAttemptAt()
	st.Reason = res.GetReason()
	if err := w.save(b, old); err != nil {
		return err
	}
	if !w.isNew && ended(old) != ended(st.GetState()) {
		if err := s.held.endedChanged(b, w); err != nil {
			return err
		}
	}
	if w.isNew {
		if err := putEvent(b, seen, tenant, res.GetEventId(), res.GetEventType(), nil); err != nil {
			return err
		}
	}
	return setResult(b, ak, res)
}

// getter is a *pebble.DB or an indexed *pebble.Batch.
type getter interface {
	Get(key []byte) ([]byte, io.Closer, error)
}

func getProto(b getter, k []byte, m proto.Message) (bool, error) {
	v, closer, err := b.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("history: read %q: %w", k, err)
	}
	defer closer.Close()
	if err := proto.Unmarshal(v, m); err != nil {
		return false, fmt.Errorf("history: decode %q: %w", k, err)
	}
	return true, nil
}

func setProto(b *pebble.Batch, k []byte, m proto.Message) error {
	v, err := proto.Marshal(m)
	if err != nil {
		return fmt.Errorf("history: encode %q: %w", k, err)
	}
	if err := b.Set(k, v, nil); err != nil {
		return fmt.Errorf("history: %w", err)
	}
	return nil
}
