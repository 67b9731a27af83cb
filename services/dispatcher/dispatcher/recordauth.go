package dispatcher

import (
	"errors"
	"fmt"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/keyring"
)

// Record authentication: the dispatcher signs what a delivery record
// says with its endpoint's secret, so a record must be ingest's before it
// is sent. Ingest writes a MAC on every delivery record under a key
// derived from the secrets key file (platform/keyring, recordmac.go); a
// record whose MAC does not verify — written by someone with access to
// the topic but not the key file, or altered — is refused at triage like
// a record naming another tenant's endpoint: FAILED, dead-lettered,
// never signed. The MAC covers what is sent (delivery, event, tenant,
// endpoint, event type, payload) and nothing a later hop changes
// (attempt, due time, holds), so it survives the retry path and the
// scheduler's delay tiers, which pass a record's bytes through.
//
// Without a key file (--insecure-plaintext-secrets, development) there is
// no key to check with and no record is checked: secrets are in the
// clear in the endpoints topic there anyway. With --accept-unsigned-
// deliveries (an upgrade's window: records written by an older ingest)
// a record without a MAC is sent; one with a MAC that fails is refused
// either way.

// recordRefusal returns why d must not be signed and sent, or nil: keys
// are the secrets key file's, acceptUnsigned is
// --accept-unsigned-deliveries.
func recordRefusal(keys *keyring.Keyring, acceptUnsigned bool, d *hooklinev1.Delivery) error {
	if !keys.AuthenticatesDeliveries() {
		return nil
	}
	if len(d.GetPayload()) == 0 && d.GetPayloadRecord() != nil {
		// Held by reference (hold.go): the MAC covers the payload, which
		// is not here yet; readHeld checks it once the payload is read
		// back, before the attempt.
		return nil
	}
	err := keys.VerifyDelivery(d)
	if errors.Is(err, keyring.ErrUnsigned) && acceptUnsigned {
		return nil
	}
	return err
}

// authentic reports whether d may be signed and sent (triage).
func (h *handler) authentic(d *hooklinev1.Delivery) bool {
	return recordRefusal(h.keys, h.cfg.AcceptUnsigned, d) == nil
}

// refusedReason is the result's reason for a delivery triage refused as
// not its endpoint's: an unauthenticated record, or one naming another
// tenant's endpoint.
func (h *handler) refusedReason(d *hooklinev1.Delivery) string {
	if err := recordRefusal(h.keys, h.cfg.AcceptUnsigned, d); err != nil {
		return fmt.Sprintf("delivery record not authenticated (%v): not written by ingest, or altered since; not sent", err)
	}
	return fmt.Sprintf("delivery of tenant %q names endpoint %s of another tenant; not sent", d.GetTenantId(), d.GetEndpointId())
}
