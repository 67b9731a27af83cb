package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
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

// payloadReadTimeout bounds one read of a held delivery's payload; a
// read that fails holds the delivery again (unreadable) rather than
// spend an attempt.
const payloadReadTimeout = 10 * time.Second

// heldCopy returns the record of d held again after r: without its
// payload, which stays in r (or where d's record already says it is).
func heldCopy(r *kgo.Record, d *hooklinev1.Delivery) *hooklinev1.Delivery {
	held := proto.Clone(d).(*hooklinev1.Delivery)
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
func (s *Service) readHeld(ctx context.Context, d *hooklinev1.Delivery) error {
	ref := d.GetPayloadRecord()
	if ref == nil || len(d.GetPayload()) > 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, payloadReadTimeout)
	defer cancel()
	read := s.readRecord
	if read == nil {
		read = s.readFromKafka
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
	if err := s.recordRefusal(d); err != nil {
		d.Payload = nil
		return fmt.Errorf("%w: %w", errNotAuthentic, err)
	}
	return nil
}

// errNotAuthentic marks a held delivery whose record, with its payload
// read back, does not verify.
var errNotAuthentic = errors.New("delivery record not authenticated: not written by ingest, or altered since; not sent")

// readFromKafka reads the record ref names from the cluster.
func (s *Service) readFromKafka(ctx context.Context, ref *hooklinev1.RecordRef) (*kgo.Record, error) {
	opts, err := s.cfg.Kafka.Opts()
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
func (s *Service) unreadHeld(ctx context.Context, r *kgo.Record, d *hooklinev1.Delivery, err error) []*kgo.Record {
	now := s.now()
	if errors.Is(err, errNotAuthentic) {
		res := s.writer.result(d, now)
		res.Attempt = d.GetAttempt()
		res.State = hooklinev1.DeliveryState_DELIVERY_STATE_FAILED
		res.Reason = err.Error()
		s.log.ErrorContext(ctx, "held delivery record not authenticated; dead-lettered unsigned", "delivery_id", d.GetDeliveryId(), "endpoint_id", d.GetEndpointId(), "err", err)
		setOutcome(ctx, "refused")
		return s.writer.deadLetter(ctx, d, res)
	}
	if errors.Is(err, payloadref.ErrGone) {
		res := s.writer.result(d, now)
		res.Attempt = d.GetAttempt() // the attempt it could not make
		res.State = hooklinev1.DeliveryState_DELIVERY_STATE_FAILED
		res.Reason = "the held delivery's payload is no longer in Kafka (" + err.Error() + "); dead-lettered without it"
		s.log.ErrorContext(ctx, "held delivery's payload gone; dead-lettered", "delivery_id", d.GetDeliveryId(), "endpoint_id", d.GetEndpointId(), "err", err)
		setOutcome(ctx, "payload_gone")
		return s.writer.deadLetter(ctx, d, res)
	}
	if end := s.endHold(ctx, d, now); end != nil {
		return end
	}
	s.log.WarnContext(ctx, "held delivery's payload not read back; held again", "delivery_id", d.GetDeliveryId(), "endpoint_id", d.GetEndpointId(), "err", err)
	s.writer.deferred(ctx, d, "payload_unreadable")
	return s.writer.deferTo(r, d, s.holdUntil(d, now, now.Add(s.cfg.ParkRecheck)))
}

// minParkWait is a paused endpoint's held delivery's first recheck; each
// recheck waits as long as the hold has lasted so far (doubling), at most
// ParkRecheck.
const minParkWait = time.Second

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
func (s *Service) endHold(ctx context.Context, d *hooklinev1.Delivery, now time.Time) []*kgo.Record {
	var reason string
	if since := heldSince(d); !since.IsZero() && now.Sub(since) >= s.cfg.MaxHold {
		reason = fmt.Sprintf("held without an attempt since %s, longer than the maximum hold (%v)", since.UTC().Format(time.RFC3339), s.cfg.MaxHold)
	} else if g := d.GetGiveUpAt(); g != nil && !now.Before(g.AsTime()) {
		reason = fmt.Sprintf("the give-up time %s passed while the delivery was held", g.AsTime().UTC().Format(time.RFC3339))
	}
	if reason == "" {
		return nil
	}
	res := s.writer.result(d, now)
	res.Attempt = d.GetAttempt() // the attempt it was waiting to make
	res.State = hooklinev1.DeliveryState_DELIVERY_STATE_EXPIRED
	res.Reason = reason
	s.log.InfoContext(ctx, "held delivery expired; dead-lettered", "delivery_id", d.GetDeliveryId(), "endpoint_id", d.GetEndpointId(), "attempt", d.GetAttempt(), "reason", reason)
	setOutcome(ctx, outcomeLabel(res.State))
	return s.writer.deadLetter(ctx, d, res)
}

// holdUntil caps an outage hold's end at the delivery's give-up time and
// at the end of its maximum hold, so that it is looked at again (and
// ended) then rather than a recheck later.
func (s *Service) holdUntil(d *hooklinev1.Delivery, now, until time.Time) time.Time {
	if g := d.GetGiveUpAt(); g != nil && until.After(g.AsTime()) {
		until = g.AsTime()
	}
	since := heldSince(d)
	if since.IsZero() {
		since = now
	}
	if end := since.Add(s.cfg.MaxHold); until.After(end) {
		until = end
	}
	return until
}

// parkWait is how long a paused endpoint's delivery waits before it looks
// again: as long as it has been held so far, at least minParkWait, at
// most ParkRecheck. A resume therefore reaches every held delivery within
// ParkRecheck (plus the scheduler's lateness), and a short pause costs
// only a few short waits.
func (s *Service) parkWait(d *hooklinev1.Delivery, now time.Time) time.Duration {
	wait := minParkWait
	if since := heldSince(d); !since.IsZero() {
		wait = max(wait, now.Sub(since))
	}
	return min(wait, max(s.cfg.ParkRecheck, minParkWait))
}

// spill defers d, waiting for its lane, through the scheduler due at,
// unless its hold is over. A spill is one hop, due when the lane will
// have room, not a recheck that repeats while a hold lasts, so d goes as
// it is (its payload with it, or the reference it already carries): its
// return to the lane then costs no read by reference (payloadref makes a
// client per read, meant for rare reads, and a backlog spills thousands).
func (s *Service) spill(ctx context.Context, r *kgo.Record, d *hooklinev1.Delivery, at time.Time, reason string) []*kgo.Record {
	return s.spillAs(ctx, r, d, proto.Clone(d).(*hooklinev1.Delivery), at, reason)
}

// spillHeld spills d by reference (heldCopy): for a member behind a
// blocked head, which goes round the retry path again and again while
// the block lasts, as a held delivery does.
func (s *Service) spillHeld(ctx context.Context, r *kgo.Record, d *hooklinev1.Delivery, at time.Time, reason string) []*kgo.Record {
	return s.spillAs(ctx, r, d, heldCopy(r, d), at, reason)
}

func (s *Service) spillAs(ctx context.Context, r *kgo.Record, d, later *hooklinev1.Delivery, at time.Time, reason string) []*kgo.Record {
	if end := s.endHold(ctx, d, s.now()); end != nil {
		return end
	}
	s.writer.deferred(ctx, d, reason)
	return s.writer.deferAs(r, d, later, at)
}
