package history

import (
	"bytes"
	"encoding/binary"
)

// The index is one Pebble keyspace. Every key starts with a short tag
// naming its kind, then NUL-separated parts; tenant, topic and ids never
// hold a NUL. Delivery and event ids sort by creation time, so every
// list below is in time order and a time range is a key range.
//
//	o  topic partition(4)                 → next offset (8): what is applied
//	s  tenant dlv                         → DeliveryStatus (the summary)
//	m  tenant dlv                         → Delivery, latest record, no payload
//	a  tenant dlv partition(4) offset(8)  → AttemptResult, in results order
//	e  tenant evt                         → GetEventResponse: type, created, the payload once
//	ed tenant evt dlv                     → ∅: an event's deliveries
//	lp tenant endpoint dlv                → ∅: by endpoint; its payload bytes (8) once a record carrying it is read
//	lq tenant endpoint state(1) dlv       → ∅: by endpoint and state
//	lt tenant type dlv                    → ∅: by event type
//	ls tenant state(1) dlv                → ∅: by state
//	lv tenant type evt                    → ∅: events by type
//	td dlv tenant                         → ∅: deliveries by age, for retention
//	te evt tenant                         → ∅: events by age, for retention
//	hb tenant endpoint                    → payload bytes (8) of the endpoint's unended deliveries
const (
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
	tagAgeDlv     = "td"
	tagAgeEvent   = "te"
	tagHeldBytes  = "hb"
)

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
