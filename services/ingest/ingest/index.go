package ingest

import (
	"slices"
	"sync"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// deliveryIndex is what DeliveryService answers from: every delivery,
// event and attempt the deliveries, results and dead-letter topics still
// hold, built by reading them from the start (so it is rebuilt at every
// start, and forgets what the topics' retention dropped). Safe for
// concurrent use; what it returns is copied.
type deliveryIndex struct {
	topics hkafka.Topics

	mu         sync.RWMutex
	deliveries map[string]*indexedDelivery
	events     map[string]*indexedEvent
	byEndpoint map[string][]string // delivery ids, in the order first seen
}

type indexedDelivery struct {
	// last is the latest Delivery record seen for it, without payload
	// (the event holds that); nil when only results were seen.
	last     *hooklinev1.Delivery
	tenant   string
	eventID  string
	endpoint string
	typ      string
	created  *timestamppb.Timestamp
	attempts []*hooklinev1.AttemptResult
}

type indexedEvent struct {
	tenant     string
	typ        string
	payload    []byte
	created    *timestamppb.Timestamp
	deliveries []string
}

func newDeliveryIndex(t hkafka.Topics) *deliveryIndex {
	return &deliveryIndex{
		topics:     t,
		deliveries: map[string]*indexedDelivery{},
		events:     map[string]*indexedEvent{},
		byEndpoint: map[string][]string{},
	}
}

func (x *deliveryIndex) apply(r *kgo.Record) {
	switch r.Topic {
	case x.topics.Deliveries:
		var d hooklinev1.Delivery
		if hkafka.Decode(r, &d) == nil && d.GetDeliveryId() != "" {
			x.putDelivery(&d)
		}
	case x.topics.Dead:
		var dl hooklinev1.DeadLetter
		// Poison records (raw, undecodable input) carry no delivery.
		if hkafka.Decode(r, &dl) == nil && dl.GetDelivery().GetDeliveryId() != "" {
			x.putDelivery(dl.GetDelivery())
		}
	case x.topics.Results:
		var res hooklinev1.AttemptResult
		if hkafka.Decode(r, &res) == nil && res.GetDeliveryId() != "" {
			x.putResult(&res)
		}
	}
}

// entry returns the delivery with id, creating it; x.mu is held.
func (x *deliveryIndex) entry(id, tenant, eventID, endpoint, typ string) *indexedDelivery {
	e := x.deliveries[id]
	if e == nil {
		e = &indexedDelivery{tenant: tenant, eventID: eventID, endpoint: endpoint, typ: typ}
		x.deliveries[id] = e
		x.byEndpoint[endpoint] = append(x.byEndpoint[endpoint], id)
		ev := x.events[eventID]
		if ev == nil {
			ev = &indexedEvent{tenant: tenant, typ: typ}
			x.events[eventID] = ev
		}
		ev.deliveries = append(ev.deliveries, id)
	}
	return e
}

func (x *deliveryIndex) putDelivery(d *hooklinev1.Delivery) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.entry(d.GetDeliveryId(), d.GetTenantId(), d.GetEventId(), d.GetEndpointId(), d.GetEventType())
	if e.created == nil {
		e.created = d.GetCreatedAt()
	}
	if ev := x.events[d.GetEventId()]; ev.payload == nil {
		ev.payload, ev.created = d.GetPayload(), d.GetCreatedAt()
	}
	last := proto.Clone(d).(*hooklinev1.Delivery)
	last.Payload = nil
	e.last = last
}

func (x *deliveryIndex) putResult(res *hooklinev1.AttemptResult) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.entry(res.GetDeliveryId(), res.GetTenantId(), res.GetEventId(), res.GetEndpointId(), res.GetEventType())
	e.attempts = append(e.attempts, res)
}

// statusOf summarises e; x.mu is held.
func statusOf(id string, e *indexedDelivery) *hooklinev1.DeliveryStatus {
	st := &hooklinev1.DeliveryStatus{
		DeliveryId: id,
		EventId:    e.eventID,
		EndpointId: e.endpoint,
		EventType:  e.typ,
		State:      hooklinev1.DeliveryState_DELIVERY_STATE_PENDING,
		CreatedAt:  e.created,
	}
	for _, a := range e.attempts {
		if a.GetAttempt() > 0 {
			st.Attempts++
		}
	}
	if n := len(e.attempts); n > 0 {
		last := e.attempts[n-1]
		st.State = last.GetState()
		st.UpdatedAt = last.GetStartedAt()
		st.NextAttemptAt = last.GetNextAttemptAt()
		st.Reason = last.GetReason()
	}
	return st
}

// delivery returns the tenant's delivery id: its status, its attempts,
// and the Delivery to resend (with payload; nil if no longer held).
func (x *deliveryIndex) delivery(tenant, id string) (*hooklinev1.DeliveryStatus, []*hooklinev1.AttemptResult, *hooklinev1.Delivery, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	e := x.deliveries[id]
	if e == nil || e.tenant != tenant {
		return nil, nil, nil, false
	}
	attempts := make([]*hooklinev1.AttemptResult, 0, len(e.attempts))
	for _, a := range e.attempts {
		attempts = append(attempts, proto.Clone(a).(*hooklinev1.AttemptResult))
	}
	var d *hooklinev1.Delivery
	if ev := x.events[e.eventID]; e.last != nil && ev.payload != nil {
		d = proto.Clone(e.last).(*hooklinev1.Delivery)
		d.Payload = ev.payload
	}
	return statusOf(id, e), attempts, d, true
}

// event returns the tenant's event id with its deliveries' statuses.
func (x *deliveryIndex) event(tenant, id string) (*hooklinev1.GetEventResponse, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	ev := x.events[id]
	if ev == nil || ev.tenant != tenant {
		return nil, false
	}
	resp := &hooklinev1.GetEventResponse{EventId: id, EventType: ev.typ, Payload: ev.payload, CreatedAt: ev.created}
	for _, did := range sortedIDs(ev.deliveries) {
		resp.Deliveries = append(resp.Deliveries, statusOf(did, x.deliveries[did]))
	}
	return resp, true
}

// list returns the tenant's deliveries of eventID and/or endpointID (one
// at least is set) in state (any if unspecified), ordered by id, after
// the id after, at most size of them, and whether more follow.
func (x *deliveryIndex) list(tenant, eventID, endpointID string, state hooklinev1.DeliveryState, after string, size int) ([]*hooklinev1.DeliveryStatus, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var candidates []string
	if eventID != "" {
		if ev := x.events[eventID]; ev != nil {
			candidates = ev.deliveries
		}
	} else {
		candidates = x.byEndpoint[endpointID]
	}
	var out []*hooklinev1.DeliveryStatus
	for _, id := range sortedIDs(candidates) {
		e := x.deliveries[id]
		if id <= after || e.tenant != tenant || (endpointID != "" && e.endpoint != endpointID) || (eventID != "" && e.eventID != eventID) {
			continue
		}
		st := statusOf(id, e)
		if state != hooklinev1.DeliveryState_DELIVERY_STATE_UNSPECIFIED && st.GetState() != state {
			continue
		}
		if len(out) == size {
			return out, true
		}
		out = append(out, st)
	}
	return out, false
}

// sortedIDs returns a sorted copy: delivery ids sort by creation time.
func sortedIDs(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// owns reports whether the tenant has deliveries to endpoint or of event
// (whichever is set) in the index.
func (x *deliveryIndex) owns(tenant, eventID, endpoint string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if eventID != "" {
		ev := x.events[eventID]
		return ev != nil && ev.tenant == tenant
	}
	ids := x.byEndpoint[endpoint]
	return len(ids) > 0 && x.deliveries[ids[0]].tenant == tenant
}

// failedIn returns the tenant's deliveries to endpoint whose latest
// result is FAILED or EXPIRED and was made in [since, until): each ready
// to send again (with payload and the next attempt number), and how many
// more matched but have no payload left.
func (x *deliveryIndex) failedIn(tenant, endpoint string, since, until time.Time) (out []*hooklinev1.Delivery, unavailable int) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	for _, id := range sortedIDs(x.byEndpoint[endpoint]) {
		e := x.deliveries[id]
		if e.tenant != tenant || len(e.attempts) == 0 {
			continue
		}
		last := e.attempts[len(e.attempts)-1]
		at := last.GetStartedAt().AsTime()
		switch last.GetState() {
		case hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, hooklinev1.DeliveryState_DELIVERY_STATE_EXPIRED:
		default:
			continue
		}
		if at.Before(since) || !at.Before(until) {
			continue
		}
		if e.last.GetKind() == hooklinev1.DeliveryKind_DELIVERY_KIND_TEST {
			continue // a failed test event is not a delivery to recover
		}
		ev := x.events[e.eventID]
		if e.last == nil || ev.payload == nil {
			unavailable++
			continue
		}
		d := proto.Clone(e.last).(*hooklinev1.Delivery)
		d.Payload = ev.payload
		for _, a := range e.attempts {
			d.Attempt = max(d.Attempt, a.GetAttempt()+1)
		}
		out = append(out, d)
	}
	return out, unavailable
}

// outcomeOf returns the state of the delivery's first result for attempt
// or a later one, and whether there is one.
func (x *deliveryIndex) outcomeOf(id string, attempt uint32) (hooklinev1.DeliveryState, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	e := x.deliveries[id]
	if e == nil {
		return 0, false
	}
	for _, a := range e.attempts {
		if a.GetAttempt() >= attempt {
			return a.GetState(), true
		}
	}
	return 0, false
}
