package ingest

import (
	"crypto/sha256"
	"unsafe"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/keyring"
)

// recordAuthenticator writes the RecordMac of the delivery records one
// write builds (keyring.AuthenticateDelivery), hashing a payload once
// for all the records that share it (a fan-out's). Not safe for
// concurrent use.
//
// Resends and recoveries do not make a new MAC: they write the stored
// record back with the MAC it was first written with, so a record the
// dispatcher refused (forged in the topic, then indexed) stays refused
// however often it is resent.
type recordAuthenticator struct {
	payload *byte // the payload sum was computed for (its first byte)
	size    int
	sum     [sha256.Size]byte
}

// authenticate sets d's RecordMac under k.
func (a *recordAuthenticator) authenticate(k *keyring.Keyring, d *hooklinev1.Delivery) {
	if !k.AuthenticatesDeliveries() {
		return
	}
	p := d.GetPayload()
	if first := unsafe.SliceData(p); first != a.payload || len(p) != a.size || first == nil {
		a.payload, a.size, a.sum = first, len(p), keyring.PayloadSum(p)
	}
	k.AuthenticateDelivery(d, a.sum)
}
