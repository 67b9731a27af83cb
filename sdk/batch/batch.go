// Package batch is the wire format of a batched delivery (issue 30;
// docs/receiver-guide.md, "Batches"): one POST whose JSON body lists an
// endpoint's events in order. The dispatcher encodes it; receivers
// (sdk/receiver, or any JSON parser) decode it.
//
// The body is
//
//	{"type":"batch","data":[
//	  {"id":"evt_…","type":"invoice.paid","timestamp":"2026-12-07T10:00:00.123456789Z","payload":{…}},
//	  {"id":"evt_…","type":"file.uploaded","timestamp":"…","payload_base64":"AAEC…"}
//	]}
//
// Each member carries its event id (the webhook-id it would have had
// alone: deduplicate on it), its event type, when it was published
// (RFC 3339, UTC) and its payload: as JSON where the payload is JSON
// (its bytes exactly as published), else base64 in payload_base64. The
// request's headers are those of any delivery — webhook-id (the batch's
// id, "bat_…", derived from its members' delivery ids, so every attempt
// of one batch carries the same one), webhook-timestamp and
// webhook-signature over the whole body (Standard Webhooks, v1 or v1a)
// — plus webhook-batch-size, the member count.
package batch

import (
	"bytes"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// HeaderSize is the header that marks a batched request and counts its
// members.
const HeaderSize = "webhook-batch-size"

// Type is the body's "type".
const Type = "batch"

// IDPrefix begins every batch id.
const IDPrefix = "bat_"

// Member is one event of a batch.
type Member struct {
	// ID is the event id: the webhook-id the event has when delivered
	// alone. Receivers deduplicate on it.
	ID string
	// Type is the event type.
	Type string
	// Timestamp is when the event was published.
	Timestamp time.Time
	// Payload is the event's payload, exactly as published.
	Payload []byte
}

// ID derives a batch's id from its members' delivery ids, in order: the
// same members give the same id, so every attempt of a batch, and a
// batch formed again from the same members after a crash, carries the
// same webhook-id.
func ID(deliveryIDs []string) string {
	h := sha256.New()
	for _, id := range deliveryIDs {
		h.Write([]byte(id))
		h.Write([]byte{0})
	}
	sum := h.Sum(nil)
	return IDPrefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:15]))
}

// Encode returns the body listing members in order. A JSON payload is
// embedded as its bytes, untouched; any other in base64.
func Encode(members []Member) []byte {
	n := 32
	for _, m := range members {
		n += len(m.ID) + len(m.Type) + len(m.Payload)*4/3 + 96
	}
	b := bytes.NewBuffer(make([]byte, 0, n))
	b.WriteString(`{"type":"batch","data":[`)
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"id":`)
		writeString(b, m.ID)
		b.WriteString(`,"type":`)
		writeString(b, m.Type)
		b.WriteString(`,"timestamp":"`)
		b.WriteString(m.Timestamp.UTC().Format(time.RFC3339Nano))
		if json.Valid(m.Payload) {
			b.WriteString(`","payload":`)
			b.Write(bytes.TrimSpace(m.Payload))
		} else {
			b.WriteString(`","payload_base64":"`)
			b.WriteString(base64.StdEncoding.EncodeToString(m.Payload))
			b.WriteByte('"')
		}
		b.WriteByte('}')
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// writeString writes s as a JSON string.
func writeString(b *bytes.Buffer, s string) {
	enc, _ := json.Marshal(s) // a string always encodes
	b.Write(enc)
}

// wire is the body as JSON decodes it.
type wire struct {
	Type string       `json:"type"`
	Data []wireMember `json:"data"`
}

type wireMember struct {
	ID            string          `json:"id"`
	Type          string          `json:"type"`
	Timestamp     time.Time       `json:"timestamp"`
	Payload       json.RawMessage `json:"payload"`
	PayloadBase64 *string         `json:"payload_base64"`
}

// ErrNotABatch is returned by Decode for a body that is not a batch.
var ErrNotABatch = errors.New(`not a batch body: want {"type":"batch","data":[…]}`)

// Decode returns the members body lists, in order. A JSON payload comes
// back as the bytes the body holds (the event's payload without
// surrounding whitespace).
func Decode(body []byte) ([]Member, error) {
	var w wire
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("batch body: %w", err)
	}
	if w.Type != Type || w.Data == nil {
		return nil, ErrNotABatch
	}
	out := make([]Member, 0, len(w.Data))
	for i, m := range w.Data {
		if m.ID == "" {
			return nil, fmt.Errorf("batch body: member %d has no id", i)
		}
		mem := Member{ID: m.ID, Type: m.Type, Timestamp: m.Timestamp, Payload: []byte(m.Payload)}
		if m.PayloadBase64 != nil {
			p, err := base64.StdEncoding.DecodeString(*m.PayloadBase64)
			if err != nil {
				return nil, fmt.Errorf("batch body: member %d (%s): payload_base64: %w", i, m.ID, err)
			}
			mem.Payload = p
		}
		out = append(out, mem)
	}
	return out, nil
}
