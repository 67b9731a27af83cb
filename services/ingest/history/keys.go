package history

import (
	"bytes"
	"encoding/binary"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
)

// The index is one Pebble keyspace. Every key starts with a short tag
// naming its kind, then NUL-separated parts; tenant, topic and ids never
// hold a NUL. Delivery and event ids sort by creation time, so every
// list below is in time order and a time range is a key range.
//
//	v                                     → the format (8): formatVersion
//	o  topic partition(4)                 → next offset (8): what is applied
//	s  tenant dlv                         → DeliveryStatus (the summary)
//	m  tenant dlv                         → Delivery, latest record, no payload
//	a  tenant dlv partition(4) offset(8)  → AttemptResult, in results order
//	e  tenant evt                         → GetEventResponse: type, created, the payload once
//	ed tenant evt dlv                     → ∅: an event's deliveries
//	lp tenant endpoint dlv                → ∅: by endpoint; its payload bytes (8) once a record carrying it is read
//	lq tenant endpoint state(1) dlv       → ∅: by endpoint and state, every state but DELIVERED
//	lt tenant type dlv                    → ∅: by event type
//	ls tenant state(1) dlv                → ∅: by state, every state but DELIVERED
//	lv tenant type evt                    → ∅: events by type
//	hb tenant endpoint                    → payload bytes (8) of the endpoint's unended deliveries
//
// What a record writes is what its compactions rewrite (half of
// `hookline dev`'s CPU at fan-out 10 was this index; BENCHMARKS.md), so
// nothing is written twice (format 2):
//   - a value leaves out what its key or the delivery's summary holds
//     (slim.go): the tenant, delivery, event, endpoint and event type
//     ids were about a third of a delivery's bytes;
//   - DELIVERED, the state nearly every delivery ends in, has no state
//     entries: a list by it walks the summaries (or the endpoint's
//     entries), where it is the common case, not a needle;
//   - retention walks each tenant's summaries and events, which sort by
//     age already, instead of age entries of their own.
const (
	tagFormat     = "v"
	tagOffset     = "o"
	tagStatus     = "s"
	tagMeta       = "m"
	tagAttempt    = "a"
	tagEvent      = "e"
	tagEventDlv   = "ed"
	tagByEndpoint = "lp"
	tagByEpState  = "lq"
	tagByType     = "lt"
	tagByState    = "ls"
	tagEvByType   = "lv"
	tagHeldBytes  = "hb"
)

// formatVersion is the layout above. An index of another (or no stored)
// format is rebuilt from the topics at Open: it is a view.
const formatVersion = 2

// stateIndexed says whether deliveries in st have state entries (ls,
// lq): every state but DELIVERED.
func stateIndexed(st hooklinev1.DeliveryState) bool {
	return st != hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED
}

// key joins tag and parts with NUL separators.
func key(tag string, parts ...string) []byte {
	n := len(tag)
	for _, p := range parts {
		n += 1 + len(p)
	}
	b := make([]byte, 0, n+12)
	b = append(b, tag...)
	for _, p := range parts {
		b = append(b, 0)
		b = append(b, p...)
	}
	return b
}

// prefix is key with a trailing NUL: every key that has parts as its
// leading parts starts with it.
func prefix(tag string, parts ...string) []byte {
	return append(key(tag, parts...), 0)
}

// stateByte is a state as one key byte (states are small enums).
func stateByte(st int32) string { return string([]byte{byte(st)}) }

func offsetKey(topic string, partition int32) []byte {
	return binary.BigEndian.AppendUint32(prefix(tagOffset, topic), uint32(partition))
}

func attemptKey(tenant, dlv string, partition int32, offset int64) []byte {
	b := binary.BigEndian.AppendUint32(prefix(tagAttempt, tenant, dlv), uint32(partition))
	return binary.BigEndian.AppendUint64(b, uint64(offset))
}

// upperBound returns the smallest key above every key starting with p.
func upperBound(p []byte) []byte {
	b := bytes.Clone(p)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return b[:i+1]
		}
	}
	return nil
}

// lastPart returns the part after the last NUL of k.
func lastPart(k []byte) string {
	return string(k[bytes.LastIndexByte(k, 0)+1:])
}
