package history

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/sdk/ids"
)

// MaxScan bounds the index entries one List call reads: a page whose
// filters match few entries ends early, short (even empty) but with More
// set and After where the scan stopped, so every call answers in bounded
// time.
const MaxScan = 20000

// Reader is the index's read side: every query, each safe for
// concurrent use with Apply, Sweep and the others.
type Reader struct {
	db     *pebble.DB
	topics Topics
	// maxScan is MaxScan; tests lower it.
	maxScan int
}

// Delivery returns the tenant's delivery id: its status, every attempt
// oldest first, and the Delivery to resend (its latest record with the
// event's payload; nil when the topics no longer hold one).
func (s *Reader) Delivery(tenant, id string) (*hooklinev1.DeliveryStatus, []*hooklinev1.AttemptResult, *hooklinev1.Delivery, bool, error) {
	st := &hooklinev1.DeliveryStatus{}
	found, err := getStatus(s.db, tenant, id, st)
	if err != nil || !found {
		return nil, nil, nil, false, err
	}
	of := idsOf(tenant, st)
	attempts, err := s.attempts(of)
	if err != nil {
		return nil, nil, nil, false, err
	}
	d, err := s.resendable(of)
	if err != nil {
		return nil, nil, nil, false, err
	}
	return st, attempts, d, true, nil
}

// resendable returns the delivery's latest record with its event's
// payload, or nil if either is gone.
func (s *Reader) resendable(of sharedIDs) (*hooklinev1.Delivery, error) {
	d, found, err := getRecord(s.db, of)
	if err != nil || !found {
		return nil, err
	}
	ev := &hooklinev1.GetEventResponse{}
	found, err = getEvent(s.db, of.tenant, of.event, ev)
	if err != nil || !found || ev.GetPayload() == nil {
		return nil, err
	}
	d.Payload = ev.GetPayload()
	return d, nil
}

func (s *Reader) attempts(of sharedIDs) ([]*hooklinev1.AttemptResult, error) {
	var out []*hooklinev1.AttemptResult
	err := scan(s.db, prefix(tagAttempt, of.tenant, of.delivery), nil, func(_, v []byte) (bool, error) {
		a, err := decodeResult(v, of)
		if err != nil {
			return false, err
		}
		out = append(out, a)
		return true, nil
	})
	return out, err
}

// Event returns the tenant's event id with its deliveries' statuses.
func (s *Reader) Event(tenant, id string) (*hooklinev1.GetEventResponse, bool, error) {
	ev := &hooklinev1.GetEventResponse{}
	found, err := getEvent(s.db, tenant, id, ev)
	if err != nil || !found {
		return nil, false, err
	}
	err = scan(s.db, prefix(tagEventDlv, tenant, id), nil, func(k, _ []byte) (bool, error) {
		st := &hooklinev1.DeliveryStatus{}
		ok, err := getStatus(s.db, tenant, lastPart(k), st)
		if ok {
			ev.Deliveries = append(ev.Deliveries, st)
		}
		return true, err
	})
	return ev, true, err
}

// Filter selects deliveries; zero fields match everything.
type Filter struct {
	EventID, EndpointID, EventType string
	State                          hooklinev1.DeliveryState
	// Created in [Since, Until); zero means unbounded.
	Since, Until time.Time
	// Newest lists newest first; a page then goes on below its After.
	Newest bool
}

// Page is one page of a list.
type Page[T any] struct {
	Items []T
	// More says another page may follow, from After (the last id read).
	More  bool
	After string
}

// Deliveries lists the tenant's deliveries matching f, ordered by id
// (creation time), after the id after, at most size of them. It walks
// the narrowest index the filter allows and checks the rest per entry
// (DELIVERED has no state entries: most deliveries of any list are).
func (s *Reader) Deliveries(tenant string, f Filter, after string, size int) (Page[*hooklinev1.DeliveryStatus], error) {
	var p []byte
	state := stateByte(int32(f.State))
	switch {
	case f.EventID != "":
		p = prefix(tagEventDlv, tenant, f.EventID)
	case f.EndpointID != "" && f.State != 0 && stateIndexed(f.State):
		p = prefix(tagByEpState, tenant, f.EndpointID, state)
	case f.EndpointID != "":
		p = prefix(tagByEndpoint, tenant, f.EndpointID)
	case f.State != 0 && stateIndexed(f.State):
		p = prefix(tagByState, tenant, state)
	case f.EventType != "":
		p = prefix(tagByType, tenant, f.EventType)
	default:
		p = prefix(tagStatus, tenant)
	}
	inline := bytes.HasPrefix(p, []byte(tagStatus+"\x00"))
	var statuses *statusReader
	if !inline {
		var err error
		if statuses, err = s.newStatusReader(tenant); err != nil {
			return Page[*hooklinev1.DeliveryStatus]{}, err
		}
		defer statuses.close()
	}
	var page Page[*hooklinev1.DeliveryStatus]
	err := s.list(p, ids.Delivery, f.Since, f.Until, after, f.Newest, func(id string, v []byte) (bool, error) {
		st := &hooklinev1.DeliveryStatus{}
		if inline {
			if err := decodeStatus(v, id, st); err != nil {
				return false, err
			}
		} else if ok, err := statuses.get(id, st); err != nil || !ok {
			return true, err
		}
		if !f.matches(st) {
			return true, nil
		}
		if len(page.Items) == size {
			page.More = true
			return false, nil
		}
		page.Items = append(page.Items, st)
		page.After = id
		return true, nil
	}, &page.More, &page.After)
	return page, err
}

// statusReader reads one tenant's summaries in id order through one
// iterator: a page's ids come from an index in ascending order, so each
// look-up seeks forward from the last, in blocks already read, instead
// of a point read that walks every level again.
type statusReader struct {
	it *pebble.Iterator
	p  []byte
	k  []byte
}

func (s *Reader) newStatusReader(tenant string) (*statusReader, error) {
	p := prefix(tagStatus, tenant)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: upperBound(p)})
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return &statusReader{it: it, p: p}, nil
}

// get reads the summary of id into st; ids in ascending order seek
// forward through blocks already read (any order is correct).
func (r *statusReader) get(id string, st *hooklinev1.DeliveryStatus) (bool, error) {
	r.k = append(append(r.k[:0], r.p...), id...)
	if !r.it.SeekGE(r.k) || !bytes.Equal(r.it.Key(), r.k) {
		return false, r.it.Error()
	}
	v, err := r.it.ValueAndErr()
	if err != nil {
		return false, fmt.Errorf("history: %w", err)
	}
	return true, decodeStatus(v, id, st)
}

func (r *statusReader) close() { _ = r.it.Close() }

func (f Filter) matches(st *hooklinev1.DeliveryStatus) bool {
	return (f.EventID == "" || st.GetEventId() == f.EventID) &&
		(f.EndpointID == "" || st.GetEndpointId() == f.EndpointID) &&
		(f.EventType == "" || st.GetEventType() == f.EventType) &&
		(f.State == 0 || st.GetState() == f.State)
}

// EventFilter selects events; zero fields match everything.
type EventFilter struct {
	EventType    string
	Since, Until time.Time
}

// Events lists the tenant's events matching f (without payloads),
// ordered by id, after the id after, at most size of them.
func (s *Reader) Events(tenant string, f EventFilter, after string, size int) (Page[*hooklinev1.GetEventResponse], error) {
	p := prefix(tagEvent, tenant)
	if f.EventType != "" {
		p = prefix(tagEvByType, tenant, f.EventType)
	}
	var page Page[*hooklinev1.GetEventResponse]
	err := s.list(p, ids.Event, f.Since, f.Until, after, false, func(id string, _ []byte) (bool, error) {
		ev := &hooklinev1.GetEventResponse{}
		if ok, err := getEvent(s.db, tenant, id, ev); err != nil || !ok {
			return true, err
		}
		if len(page.Items) == size {
			page.More = true
			return false, nil
		}
		ev.Payload = nil
		page.Items = append(page.Items, ev)
		page.After = id
		return true, nil
	}, &page.More, &page.After)
	return page, err
}

// list walks the keys under p whose last part (an id of kind idPrefix)
// is above after (newest: below it, walking down) and inside [since,
// until), calling fn with each id and value until fn says stop. Past
// MaxScan entries it stops and sets *more, *last to go on from where it
// stopped.
func (s *Reader) list(p []byte, idPrefix string, since, until time.Time, after string, newest bool, fn func(id string, v []byte) (bool, error), more *bool, last *string) error {
	lo := p
	if !since.IsZero() {
		lo = append(bytes.Clone(p), ids.Floor(idPrefix, since)...)
	}
	hi := upperBound(p)
	if !until.IsZero() {
		hi = append(bytes.Clone(p), ids.Floor(idPrefix, until)...)
	}
	if after != "" {
		if a := append(bytes.Clone(p), after...); newest && bytes.Compare(a, hi) < 0 {
			hi = a // every key below after
		} else if a = append(a, 0); !newest && bytes.Compare(a, lo) > 0 {
			lo = a // the first key above after
		}
	}
	scanned, prev := 0, ""
	each := scan
	if newest {
		each = scanDown
	}
	return each(s.db, lo, hi, func(k, v []byte) (bool, error) {
		if scanned++; scanned > s.maxScan {
			*more, *last = true, prev // go on from the first unread
			return false, nil
		}
		prev = lastPart(k)
		return fn(prev, v)
	})
}

// scan calls fn with each key and value of db in [lo, hi) (hi nil: every
// key starting with lo) until fn says stop. The slices are valid only
// during the call. The Reader and the Writer (retention) both walk the
// index with it.
func scan(db *pebble.DB, lo, hi []byte, fn func(k, v []byte) (bool, error)) error {
	return walk(db, lo, hi, false, fn)
}

// scanDown is scan from the last key down.
func scanDown(db *pebble.DB, lo, hi []byte, fn func(k, v []byte) (bool, error)) error {
	return walk(db, lo, hi, true, fn)
}

func walk(db *pebble.DB, lo, hi []byte, down bool, fn func(k, v []byte) (bool, error)) error {
	if hi == nil {
		hi = upperBound(lo)
	}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	first, next := it.First, it.Next
	if down {
		first, next = it.Last, it.Prev
	}
	for first(); it.Valid(); next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return fmt.Errorf("history: %w", err)
		}
		goOn, err := fn(it.Key(), v)
		if err != nil || !goOn {
			_ = it.Close()
			return err
		}
	}
	return it.Close()
}

// OwnsEvent reports whether the tenant has the event in the index.
func (s *Reader) OwnsEvent(tenant, eventID string) (bool, error) {
	return s.has(key(tagEvent, tenant, eventID))
}

// OwnsEndpoint reports whether the tenant has deliveries to endpoint in
// the index.
func (s *Reader) OwnsEndpoint(tenant, endpoint string) (bool, error) {
	found := false
	err := scan(s.db, prefix(tagByEndpoint, tenant, endpoint), nil, func(_, _ []byte) (bool, error) {
		found = true
		return false, nil
	})
	return found, err
}

func (s *Reader) has(k []byte) (bool, error) {
	_, closer, err := s.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("history: %w", err)
	}
	return true, closer.Close()
}

// FailedIDs returns the ids of the tenant's deliveries to endpoint whose
// latest result is FAILED or EXPIRED and was made in [since, until),
// test deliveries left out, at most limit of them (a caller that asks
// for one more than it accepts learns there are too many). It reads the
// index's summaries and payload-free delivery records only: counting a
// window costs no payload, however large its deliveries are.
func (s *Reader) FailedIDs(tenant, endpoint string, since, until time.Time, limit int) ([]string, error) {
	var out []string
	for _, state := range failedStates {
		err := scan(s.db, prefix(tagByEpState, tenant, endpoint, stateByte(int32(state))), nil, func(k, _ []byte) (bool, error) {
			if len(out) >= limit {
				return false, nil
			}
			id := lastPart(k)
			_, ok, err := s.failedIn(tenant, id, since, until)
			if err != nil || !ok {
				return err == nil, err
			}
			m, _, err := getRecord(s.db, sharedIDs{tenant: tenant, delivery: id})
			if err != nil {
				return false, err
			}
			if m.GetKind() == hooklinev1.DeliveryKind_DELIVERY_KIND_TEST {
				return true, nil // a failed test event is not a delivery to recover
			}
			out = append(out, id)
			return true, nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

var failedStates = []hooklinev1.DeliveryState{hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, hooklinev1.DeliveryState_DELIVERY_STATE_EXPIRED}

// failedIn returns the status of the tenant's delivery id and whether
// its latest result is FAILED or EXPIRED, made in [since, until).
func (s *Reader) failedIn(tenant, id string, since, until time.Time) (*hooklinev1.DeliveryStatus, bool, error) {
	st := &hooklinev1.DeliveryStatus{}
	if ok, err := getStatus(s.db, tenant, id, st); err != nil || !ok {
		return nil, false, err
	}
	if !slices.Contains(failedStates, st.GetState()) {
		return nil, false, nil
	}
	at := st.GetUpdatedAt().AsTime()
	return st, !at.Before(since) && at.Before(until), nil
}

// Redeliverable returns the tenant's delivery id ready to send again:
// with its event's payload and the next attempt number, if its latest
// result is still FAILED or EXPIRED in [since, until) (a delivery
// delivered since FailedIDs listed it is not sent again). It returns
// nil and found true when the delivery still qualifies but its payload
// is no longer held; found false when it no longer qualifies.
func (s *Reader) Redeliverable(tenant, id string, since, until time.Time) (d *hooklinev1.Delivery, found bool, err error) {
	st, ok, err := s.failedIn(tenant, id, since, until)
	if err != nil || !ok {
		return nil, false, err
	}
	of := idsOf(tenant, st)
	if d, err = s.resendable(of); err != nil || d == nil {
		return nil, err == nil, err
	}
	attempts, err := s.attempts(of)
	if err != nil {
		return nil, false, err
	}
	for _, a := range attempts {
		d.Attempt = max(d.Attempt, a.GetAttempt()+1)
	}
	return d, true, nil
}

// OutcomeOf returns the state of the delivery's first result for attempt
// or a later one, and whether there is one.
func (s *Reader) OutcomeOf(tenant, id string, attempt uint32) (hooklinev1.DeliveryState, bool, error) {
	var state hooklinev1.DeliveryState
	found := false
	err := scan(s.db, prefix(tagAttempt, tenant, id), nil, func(_, v []byte) (bool, error) {
		a, err := decodeResult(v, sharedIDs{tenant: tenant, delivery: id})
		if err != nil {
			return false, err
		}
		if a.GetAttempt() >= attempt {
			state, found = a.GetState(), true
			return false, nil
		}
		return true, nil
	})
	return state, found, err
}

// Recent returns the tenant's n latest deliveries to endpoint, newest
// first.
func (s *Reader) Recent(tenant, endpoint string, n int) ([]*hooklinev1.DeliveryStatus, error) {
	p := prefix(tagByEndpoint, tenant, endpoint)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: upperBound(p)})
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer it.Close()
	var out []*hooklinev1.DeliveryStatus
	for it.Last(); it.Valid() && len(out) < n; it.Prev() {
		st := &hooklinev1.DeliveryStatus{}
		ok, err := getStatus(s.db, tenant, lastPart(it.Key()), st)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, st)
		}
	}
	return out, it.Error()
}
