package keyring

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"slices"
	"sync"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
)

// Delivery records are authenticated to the dispatcher with a MAC that
// only a holder of the key file can make: ingest writes one on every
// delivery record (RecordMac), the dispatcher verifies it before it signs
// and sends. Without it the deliveries topic would be a signing oracle for
// whoever can write it: the dispatcher signs what a record says with the
// endpoint's secret. The MAC key of each key-file key is derived from it
// (HKDF-SHA256, its own label), so the key file ingest and the dispatcher
// already share, its Secret and its rotation serve both; a key id names
// which key made a MAC, so records written before a rotation verify
// while the old key is still in the file.

// Errors verifying a delivery record, wrapped with detail.
var (
	// ErrUnsigned: the record carries no MAC (written by something
	// without the key file, or before ingest wrote MACs).
	ErrUnsigned = errors.New("keyring: the delivery record carries no MAC")
	// ErrBadMAC: the record's MAC does not verify under the key it names,
	// or names a key the key file does not hold.
	ErrBadMAC = errors.New("keyring: the delivery record's MAC does not verify")
)

// macLabel separates delivery-record MAC keys from every other use of a
// key-file key.
const macLabel = "hookline delivery record MAC v1"

// recordMACKey is the delivery-record MAC key of one key-file key, with
// a pool of HMAC states keyed with it: a keyed HMAC-SHA256 costs two
// SHA-256 states and their key blocks to make, and Reset returns one to
// its keyed state for a fraction of that (one per delivery record, in
// ingest's fan-out and the dispatcher's check). Safe for concurrent use.
type recordMACKey struct {
	pool sync.Pool // of *macState, keyed
}

// macState is one keyed HMAC and the buffer its input is encoded in.
type macState struct {
	h   hash.Hash
	buf []byte
}

// newRecordMACKey derives the delivery-record MAC key of a key-file key.
func newRecordMACKey(raw []byte) (*recordMACKey, error) {
	key, err := hkdf.Key(sha256.New, raw, nil, macLabel, sha256.Size)
	if err != nil {
		return nil, err
	}
	return &recordMACKey{pool: sync.Pool{New: func() any { return &macState{h: hmac.New(sha256.New, key)} }}}, nil
}

// PayloadSum is the hash of a payload that a delivery record's MAC
// covers; a fan-out computes it once for all its records.
func PayloadSum(payload []byte) [sha256.Size]byte { return sha256.Sum256(payload) }

// AuthenticatesDeliveries reports whether k makes and checks delivery
// record MACs: false for a plaintext Keyring (no key file), which has
// nothing to make them with.
func (k *Keyring) AuthenticatesDeliveries() bool { return len(k.macs) > 0 }

// AuthenticateDelivery sets d's RecordMac under the current key, over
// its delivery, event, tenant, endpoint, event type and payload (sum,
// from PayloadSum(d.Payload)). A plaintext Keyring sets none.
func (k *Keyring) AuthenticateDelivery(d *hooklinev1.Delivery, sum [sha256.Size]byte) {
	if !k.AuthenticatesDeliveries() {
		return
	}
	d.RecordMac = &hooklinev1.RecordMac{KeyId: k.current, Mac: deliveryMAC(k.macs[k.current], d, sum)}
}

// VerifyDelivery returns nil when d's RecordMac verifies, an error
// wrapping ErrUnsigned when it has none, ErrBadMAC when it does not
// verify. A plaintext Keyring verifies nothing and returns
// ErrUnsigned for every record: the caller decides (it has no secrets
// sealed at rest either).
func (k *Keyring) VerifyDelivery(d *hooklinev1.Delivery) error {
	m := d.GetRecordMac()
	if m == nil || len(m.GetMac()) == 0 {
		return ErrUnsigned
	}
	key, ok := k.macs[m.GetKeyId()]
	if !ok {
		return fmt.Errorf("%w: key %q is not in the key file", ErrBadMAC, m.GetKeyId())
	}
	if !hmac.Equal(m.GetMac(), deliveryMAC(key, d, PayloadSum(d.GetPayload()))) {
		return fmt.Errorf("%w (key %q)", ErrBadMAC, m.GetKeyId())
	}
	return nil
}

// deliveryMAC is HMAC-SHA256 under key of the record's authenticated
// fields, each length-prefixed so no two field lists encode alike.
func deliveryMAC(key *recordMACKey, d *hooklinev1.Delivery, sum [sha256.Size]byte) []byte {
	m := key.pool.Get().(*macState)
	defer key.pool.Put(m)
	m.h.Reset()
	b := m.buf[:0]
	for _, f := range [...]string{d.GetDeliveryId(), d.GetEventId(), d.GetTenantId(), d.GetEndpointId(), d.GetEventType()} {
		b = appendField(b, f)
	}
	b = appendField(b, string(sum[:]))
	b = appendTransformed(b, d.GetTransformed())
	b = appendBatch(b, d.GetBatch())
	m.h.Write(b)
	if cap(b) <= 4<<10 { // a record with huge ids does not keep its buffer
		m.buf = b
	}
	return m.h.Sum(nil)
}

// appendField appends f, prefixed with its length (uvarint).
func appendField(b []byte, f string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(f))), f...)
}

// appendBatch appends a batch's members (issue 30: a batch's record is
// made by the dispatcher, which holds the key file too): the delivery,
// event and type each member's result and dead letter name, so a writer
// without the key file cannot send a batch's body under other members'
// names. A record that is not a batch appends nothing.
func appendBatch(b []byte, batch *hooklinev1.Batch) []byte {
	if batch == nil {
		return b
	}
	b = appendField(b, "batch")
	b = binary.AppendUvarint(b, uint64(len(batch.GetMembers())))
	for _, m := range batch.GetMembers() {
		b = appendField(appendField(appendField(b, m.GetDeliveryId()), m.GetEventId()), m.GetEventType())
	}
	return b
}

// appendTransformed appends what a transformation set on the record
// (DESIGN I43): the url, method and headers the attempt uses and its
// outcome, so a writer without the key file can neither redirect nor
// re-head a transformed delivery, nor cancel or fail one. A record
// without a transformation appends nothing: its MAC is what it was
// before transformations existed.
func appendTransformed(b []byte, t *hooklinev1.Transformed) []byte {
	if t == nil {
		return b
	}
	b = appendField(b, "transformed")
	b = appendField(b, t.GetUrl())
	b = appendField(b, t.GetMethod())
	names := make([]string, 0, len(t.GetHeaders()))
	for k := range t.GetHeaders() {
		names = append(names, k)
	}
	slices.Sort(names)
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, k := range names {
		b = appendField(appendField(b, k), t.GetHeaders()[k])
	}
	cancelled := "0"
	if t.GetCancelled() {
		cancelled = "1"
	}
	b = appendField(b, cancelled)
	return appendField(b, t.GetError())
}
