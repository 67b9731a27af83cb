package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/keyring"
	"github.com/hookline/hookline/platform/lanes"
	"github.com/hookline/hookline/platform/payloadref"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Every hold ends. A delivery held without an attempt — its endpoint
// paused (park), in outage mode (hold), or its backlog spilled (spill) —
// goes back through the scheduler, and each time it comes back the hold
// is decided again. The hold's start travels with it (Delivery.held_since,
// on records of kind DEFERRED: any other kind was written by an attempt
// or by ingest and starts afresh), so however often it is re-held:
//
//   - a hold that has lasted MaxHold ends the delivery EXPIRED, with a
//     result and a dead letter (MaxHold is below the topics' retention,
//     so the records a resend or a recover reads are still there);
//   - a delivery whose give-up time has passed while held (outage mode
//     and spills do not move it; a pause does) ends EXPIRED too, instead
//     of being held again.

// A held delivery is held by reference. Its payload stays in the
// deliveries-topic record it was read from; the record that carries the
// hold through the scheduler (retries, delay tiers, back to deliveries)
// leaves the payload out and names that record instead
// (Delivery.payload_record), and every later re-hold keeps the name. So a
// hold writes the payload to Kafka at most once however many times it
// is looked at again (a paused endpoint's delivery rechecks every few
// seconds for up to --max-hold), and each recheck costs a record of a
// few hundred bytes. When the hold ends in an attempt the payload is read
// back (platform/payloadref) just before the request; the record is
// still retained then, since a hold ends at --max-hold, below the
// topics' retention. A hold that ends without an attempt (expired) dead-
// letters the delivery without its payload, naming where it is; the
// history keeps the payload for a resend or a recover.

// holds holds deliveries without an attempt, and ends their holds: a
// paused endpoint's delivery parked (park), one in outage mode (hold) or
// behind an unusable secret (holdUnsigned), a lane's waiting delivery
// spilled (spill) or waiting behind its lane's blocked head
// (parkBehind), and a held delivery whose payload could not
// be read back (unreadHeld); it reads that payload back before the
// attempt (readHeld). It decides whether and until when a delivery is
// held, or that its hold is over (endHold), and asks the writer for the
// records. It holds only what that takes, handed over by New once the
// options are applied: the Service's config by pointer (--max-hold, the
// rechecks, --accept-unsigned-deliveries and the Kafka options are read
// as they are used: tests change them on s.cfg after New), the secrets
// keys a payload read back is authenticated with, the parked topic, the
// logger, the clock and the writer. The handler, the attempter
// (handle.go) and the engine decide that a delivery is held and ask it
// for the records.
type holds struct {
	cfg    *Config
	keys   *keyring.Keyring
	parked string
	log    *slog.Logger
	now    func() time.Time
	writer *recordWriter
	// readRecord reads a held delivery's payload record back (nil: from
	// the cluster, readFromKafka; tests replace it).
	readRecord func(context.Context, *hooklinev1.RecordRef) (*kgo.Record, error)
}

// payloadReadTimeout bounds one read of a held delivery's payload; a
// read that fails holds the delivery again (unreadable) rather than
// spend an attempt.
const payloadReadTimeout = 10 * time.Second

// heldCopy returns the record of d held again after r: without its
// payload, which stays in r (or where d's record already says it is).
func heldCopy(r *kgo.Record, d *hooklinev1.Delivery) *hooklinev1.Delivery {
	held := proto.Clone(d).(*hooklinev1.Delivery)
	if r.Topic == formedTopic {
		return held // a batch with no record of its own yet carries its body (batch.go)
	}
	if len(held.GetPayload()) > 0 {
		if held.GetPayloadRecord() == nil {
			held.PayloadRecord = payloadref.Of(r)
		}
		held.Payload = nil
	}
	return held
}

// readHeld reads back the payload of d, held by reference, into d. It
// does nothing for a delivery that carries its payload.
func (h *holds) readHeld(ctx context.Context, d *hooklinev1.Delivery) error {
	ref := d.GetPayloadRecord()
	if ref == nil || len(d.GetPayload()) > 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, payloadReadTimeout)
	defer cancel()
	read := h.readRecord
	if read == nil {
		read = h.readFromKafka
	}
	rec, err := read(ctx, ref)
	if err != nil {
		return err
	}
	var orig hooklinev1.Delivery
	if err := hkafka.Decode(rec, &orig); err != nil || orig.GetDeliveryId() != d.GetDeliveryId() || len(orig.GetPayload()) == 0 {
		return fmt.Errorf("%w: %s/%d@%d does not hold delivery %s's payload", payloadref.ErrGone, ref.GetTopic(), ref.GetPartition(), ref.GetOffset(), d.GetDeliveryId())
	}
	d.Payload = orig.GetPayload()
	// Its record MAC covers the payload (recordauth.go): checked now that
	// the payload is here, so a forged reference record that points at
	// another delivery's payload, or altered fields, is refused.
	if err := recordRefusal(h.keys, h.cfg.AcceptUnsigned, d); err != nil {
		d.Payload = nil
		return fmt.Errorf("%w: %w", errNotAuthentic, err)
	}
	return nil
}

// errNotAuthentic marks a held delivery whose record, with its payload
// read back, does not verify.
var errNotAuthentic = errors.New("delivery record not authenticated: not written by ingest, or altered since; not sent")

// readFromKafka reads the record ref names from the cluster.
func (h *holds) readFromKafka(ctx context.Context, ref *hooklinev1.RecordRef) (*kgo.Record, error) {
	opts, err := h.cfg.Kafka.Opts()
	if err != nil {
		return nil, err
	}
	return payloadref.Read(ctx, opts, ref)
}

// unreadHeld settles d, held by reference, whose payload could not be
// read back (err) before its attempt; no attempt is spent. A payload no
// longer there ends the delivery FAILED with a dead letter; a read that
// failed otherwise (Kafka unavailable) holds it again for a recheck,
// within its hold's bounds.
func (h *holds) unreadHeld(ctx context.Context, r *kgo.Record, d *hooklinev1.Delivery, err error) []*kgo.Record {
	now := h.now()
	if errors.Is(err, errNotAuthentic) {
		res := h.writer.result(d, now)
		res.Attempt = d.GetAttempt()
		res.State = hooklinev1.DeliveryState_DELIVERY_STATE_FAILED
		res.Reason = err.Error()
		h.log.ErrorContext(ctx, "held delivery record not authenticated; dead-lettered unsigned", "delivery_id", d.GetDeliveryId(), "endpoint_id", d.GetEndpointId(), "err", err)
		setOutcome(ctx, "refused")
		return h.writer.deadLetter(ctx, d, res)
	}
	if errors.Is(err, payloadref.ErrGone) {
		res := h.writer.result(d, now)
		res.Attempt = d.GetAttempt() // the attempt it could not make
		res.State = hooklinev1.DeliveryState_DELIVERY_STATE_FAILED
		res.Reason = "the held delivery's payload is no longer in Kafka (" + err.Error() + "); dead-lettered without it"
		h.log.ErrorContext(ctx, "held delivery's payload gone; dead-lettered", "delivery_id", d.GetDeliveryId(), "endpoint_id", d.GetEndpointId(), "err", err)
		setOutcome(ctx, "payload_gone")
		return h.writer.deadLetter(ctx, d, res)
	}
	if end := h.endHold(ctx, d, now); end != nil {
		return end
	}
	h.log.WarnContext(ctx, "held delivery's payload not read back; held again", "delivery_id", d.GetDeliveryId(), "endpoint_id", d.GetEndpointId(), "err", err)
	h.writer.deferred(ctx, d, "payload_unreadable")
	return h.writer.deferTo(r, d, h.holdUntil(d, now, now.Add(h.cfg.ParkRecheck)))
}

// heldSince returns when d's current hold began, or zero when it is not
// being held.
func heldSince(d *hooklinev1.Delivery) time.Time {
	if d.GetKind() != hooklinev1.DeliveryKind_DELIVERY_KIND_DEFERRED || d.GetHeldSince() == nil {
		return time.Time{}
	}
	return d.GetHeldSince().AsTime()
}

// holdStart is held_since for d held (again) at now.
func holdStart(d *hooklinev1.Delivery, now time.Time) *timestamppb.Timestamp {
	if since := heldSince(d); !since.IsZero() {
		return d.GetHeldSince()
	}
	return timestamppb.New(now)
}

// endHold returns the records that end d instead of holding it again at
// now, or nil when it may be held.
func (h *holds) endHold(ctx context.Context, d *hooklinev1.Delivery, now time.Time) []*kgo.Record {
	var reason string
	if since := heldSince(d); !since.IsZero() && now.Sub(since) >= h.cfg.MaxHold {
		reason = fmt.Sprintf("held without an attempt since %s, longer than the maximum hold (%v)", since.UTC().Format(time.RFC3339), h.cfg.MaxHold)
	} else if g := d.GetGiveUpAt(); g != nil && !now.Before(g.AsTime()) {
		reason = fmt.Sprintf("the give-up time %s passed while the delivery was held", g.AsTime().UTC().Format(time.RFC3339))
	}
	if reason == "" {
		return nil
	}
	res := h.writer.result(d, now)
	res.Attempt = d.GetAttempt() // the attempt it was waiting to make
	res.State = hooklinev1.DeliveryState_DELIVERY_STATE_EXPIRED
	res.Reason = reason
	h.log.InfoContext(ctx, "held delivery expired; dead-lettered", "delivery_id", d.GetDeliveryId(), "endpoint_id", d.GetEndpointId(), "attempt", d.GetAttempt(), "reason", reason)
	setOutcome(ctx, outcomeLabel(res.State))
	return h.writer.deadLetter(ctx, d, res)
}

// holdUntil caps an outage hold's end at the delivery's give-up time and
// at the end of its maximum hold, so that it is looked at again (and
// ended) then rather than a recheck later.
func (h *holds) holdUntil(d *hooklinev1.Delivery, now, until time.Time) time.Time {
	if g := d.GetGiveUpAt(); g != nil && until.After(g.AsTime()) {
		until = g.AsTime()
	}
	since := heldSince(d)
	if since.IsZero() {
		since = now
	}
	if end := since.Add(h.cfg.MaxHold); until.After(end) {
		until = end
	}
	return until
}

// park holds a paused endpoint's delivery without an attempt: it is
// written once, by reference (hold.go), to the parked topic, keyed by its
// delivery id, due at the end of its hold (held_since + --max-hold), and
// stays there until the scheduler releases it — when the endpoint resumes
// or is deleted, or when the hold is over (then endHold ends it EXPIRED)
// — with a tombstone of the parked record in the same transaction
// (docs/DESIGN.md "Paused endpoints hold in a parked topic", I45). One
// record per hold, not one per recheck. Its attempt number is untouched;
// the release adds the time it was parked to paused_for and give_up_at
// (R-ENDPOINT-2). The first time, a PARKED result says so.
func (h *holds) park(ctx context.Context, r *kgo.Record, d *hooklinev1.Delivery, now time.Time) []*kgo.Record {
	if end := h.endHold(ctx, d, now); end != nil {
		return end
	}
	var out []*kgo.Record
	if d.GetPausedFor().AsDuration() == 0 {
		res := h.writer.result(d, now)
		res.Attempt = 0
		res.State = hooklinev1.DeliveryState_DELIVERY_STATE_PARKED
		res.Reason = "endpoint paused"
		out = h.writer.resultRecords(ctx, d, res)
	}
	held := heldCopy(r, d) // by reference (hold.go)
	held.HeldSince = holdStart(d, now)
	held.DueAt = timestamppb.New(held.GetHeldSince().AsTime().Add(h.cfg.MaxHold))
	held.ParkedAt = timestamppb.New(now)
	held.Kind = hooklinev1.DeliveryKind_DELIVERY_KIND_DEFERRED
	h.writer.deferred(ctx, d, "endpoint paused")
	parked := h.writer.records(h.parked, d.GetDeliveryId(), held)
	parked[0].Headers = append(parked[0].Headers, lanes.WithoutParkedBehind(r.Headers)...)
	return append(out, parked...)
}

// parkBehind holds d, a member of ordered lane key waiting behind the
// lane's blocked head, in the parked topic like a paused endpoint's
// delivery (park): once, by reference, marked with its lane
// (lanes.MarkParkedBehind), due at the end of its hold (its give-up time
// or held_since + --max-hold, whichever is first: a block moves neither).
// The scheduler releases it once the lanes topic says the lane is no
// longer blocked before it, or the endpoint is gone, or the hold is over
// (then endHold ends it EXPIRED). No PARKED result: the member is
// waiting for its lane, as a spilled one is; parked_at stays unset, so
// the release adds nothing to its paused time.
func (h *holds) parkBehind(ctx context.Context, r *kgo.Record, d *hooklinev1.Delivery, key string, now time.Time) []*kgo.Record {
	if end := h.endHold(ctx, d, now); end != nil {
		return end
	}
	held := heldCopy(r, d) // by reference (hold.go)
	held.HeldSince = holdStart(d, now)
	held.DueAt = timestamppb.New(h.holdUntil(held, now, now.Add(h.cfg.MaxHold)))
	held.Kind = hooklinev1.DeliveryKind_DELIVERY_KIND_DEFERRED
	h.writer.deferred(ctx, d, "lane blocked")
	parked := h.writer.records(h.parked, d.GetDeliveryId(), held)
	parked[0].Headers = append(parked[0].Headers, r.Headers...)
	lanes.MarkParkedBehind(parked[0], key)
	return parked
}

// hold defers d while its endpoint is in outage mode: no attempt spent.
// A hold that is over (MaxHold, or the give-up time passed) ends the
// delivery instead.
func (h *holds) hold(ctx context.Context, r *kgo.Record, d *hooklinev1.Delivery, until time.Time) []*kgo.Record {
	annotate(ctx, d)
	now := h.now()
	if end := h.endHold(ctx, d, now); end != nil {
		return end
	}
	h.writer.deferred(ctx, d, "outage")
	return h.writer.deferTo(r, d, h.holdUntil(d, now, until))
}

// holdUnsigned holds d, whose endpoint's secret cannot be used (sealed
// under a key the key file lacks, or not opening): an operator's fix
// (the key back in --secrets-key-file, a restart) sends it on, so no
// attempt is spent and nothing is dead-lettered meanwhile. It looks
// again every --outage-recheck and ends EXPIRED after --max-hold, like
// every hold.
func (h *holds) holdUnsigned(ctx context.Context, r *kgo.Record, d *hooklinev1.Delivery, id string, err error) []*kgo.Record {
	now := h.now()
	if end := h.endHold(ctx, d, now); end != nil {
		return end
	}
	h.log.ErrorContext(ctx, "endpoint secret unusable; delivery held", "endpoint_id", id, "delivery_id", d.GetDeliveryId(), "err", err)
	h.writer.deferred(ctx, d, "secret_unusable")
	return h.writer.deferTo(r, d, h.holdUntil(d, now, now.Add(h.cfg.OutageRecheck)))
}

// spill defers d, waiting for its lane, through the scheduler due at,
// unless its hold is over. A spill is one hop, due when the lane will
// have room, not a recheck that repeats while a hold lasts, so d goes as
// it is (its payload with it, or the reference it already carries): its
// return to the lane then costs no read by reference (payloadref makes a
// client per read, meant for rare reads, and a backlog spills thousands).
func (h *holds) spill(ctx context.Context, r *kgo.Record, d *hooklinev1.Delivery, at time.Time, reason string) []*kgo.Record {
	if end := h.endHold(ctx, d, h.now()); end != nil {
		return end
	}
	h.writer.deferred(ctx, d, reason)
	return h.writer.deferAs(r, d, proto.Clone(d).(*hooklinev1.Delivery), at)
}
