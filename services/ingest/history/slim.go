package history

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/protobuf/proto"
)

// A value leaves out the ids its key or its delivery's summary already
// holds (keys.go, format 2), and gets them back when it is read: the
// writers below clear those fields for the encoding only (the message is
// the caller's again when they return), the readers set them from the
// key's parts and the summary.

// sharedIDs is what a delivery's values share: its tenant (a key part) and its
// summary's ids.
type sharedIDs struct {
	tenant, delivery, event, endpoint, eventType string
}

func idsOf(tenant string, st *hooklinev1.DeliveryStatus) sharedIDs {
	return sharedIDs{tenant, st.GetDeliveryId(), st.GetEventId(), st.GetEndpointId(), st.GetEventType()}
}

// setStatus writes st under its key without its delivery id (the key's
// last part).
func setStatus(b *pebble.Batch, k []byte, st *hooklinev1.DeliveryStatus) error {
	id := st.DeliveryId
	st.DeliveryId = ""
	defer func() { st.DeliveryId = id }()
	return setProto(b, k, st)
}

// decodeStatus reads a summary stored by setStatus: id is its key's
// delivery id.
func decodeStatus(v []byte, id string, st *hooklinev1.DeliveryStatus) error {
	if err := proto.Unmarshal(v, st); err != nil {
		return fmt.Errorf("history: decode status: %w", err)
	}
	st.DeliveryId = id
	return nil
}

// getStatus reads the tenant's delivery id's summary.
func getStatus(r getter, tenant, id string, st *hooklinev1.DeliveryStatus) (bool, error) {
	found, err := getProto(r, key(tagStatus, tenant, id), st)
	if found {
		st.DeliveryId = id
	}
	return found, err
}

// setResult writes an attempt's result without the ids its summary holds.
func setResult(b *pebble.Batch, k []byte, a *hooklinev1.AttemptResult) error {
	was := sharedIDs{a.TenantId, a.DeliveryId, a.EventId, a.EndpointId, a.EventType}
	a.TenantId, a.DeliveryId, a.EventId, a.EndpointId, a.EventType = "", "", "", "", ""
	defer func() {
		a.TenantId, a.DeliveryId, a.EventId, a.EndpointId, a.EventType = was.tenant, was.delivery, was.event, was.endpoint, was.eventType
	}()
	return setProto(b, k, a)
}

// decodeResult reads a result stored by setResult.
func decodeResult(v []byte, of sharedIDs) (*hooklinev1.AttemptResult, error) {
	a := &hooklinev1.AttemptResult{}
	if err := proto.Unmarshal(v, a); err != nil {
		return nil, fmt.Errorf("history: decode attempt: %w", err)
	}
	a.TenantId, a.DeliveryId, a.EventId, a.EndpointId, a.EventType = of.tenant, of.delivery, of.event, of.endpoint, of.eventType
	return a, nil
}

// setRecord writes a delivery's latest record without its payload (kept
// with the event) and the ids its summary holds.
func setRecord(b *pebble.Batch, k []byte, d *hooklinev1.Delivery) error {
	was := sharedIDs{d.TenantId, d.DeliveryId, d.EventId, d.EndpointId, d.EventType}
	payload := d.Payload
	d.TenantId, d.DeliveryId, d.EventId, d.EndpointId, d.EventType, d.Payload = "", "", "", "", "", nil
	defer func() {
		d.TenantId, d.DeliveryId, d.EventId, d.EndpointId, d.EventType = was.tenant, was.delivery, was.event, was.endpoint, was.eventType
		d.Payload = payload
	}()
	return setProto(b, k, d)
}

// getRecord reads the latest record of the delivery of, stored by
// setRecord (without its payload).
func getRecord(r getter, of sharedIDs) (*hooklinev1.Delivery, bool, error) {
	d := &hooklinev1.Delivery{}
	found, err := getProto(r, key(tagMeta, of.tenant, of.delivery), d)
	if !found || err != nil {
		return nil, false, err
	}
	d.TenantId, d.DeliveryId, d.EventId, d.EndpointId, d.EventType = of.tenant, of.delivery, of.event, of.endpoint, of.eventType
	return d, true, nil
}

// setEvent writes an event without its id (its key's last part).
func setEvent(b *pebble.Batch, k []byte, ev *hooklinev1.GetEventResponse) error {
	id := ev.EventId
	ev.EventId = ""
	defer func() { ev.EventId = id }()
	return setProto(b, k, ev)
}

// getEvent reads the tenant's event id, stored by setEvent.
func getEvent(r getter, tenant, id string, ev *hooklinev1.GetEventResponse) (bool, error) {
	found, err := getProto(r, key(tagEvent, tenant, id), ev)
	if found {
		ev.EventId = id
	}
	return found, err
}
