package dispatcher

import (
	"context"
	"fmt"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/twmb/franz-go/pkg/kgo"
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
	res := s.result(d, now)
	res.Attempt = d.GetAttempt() // the attempt it was waiting to make
	res.State = hooklinev1.DeliveryState_DELIVERY_STATE_EXPIRED
	res.Reason = reason
	s.log.InfoContext(ctx, "held delivery expired; dead-lettered", "delivery_id", d.GetDeliveryId(), "endpoint_id", d.GetEndpointId(), "attempt", d.GetAttempt(), "reason", reason)
	setOutcome(ctx, outcomeLabel(res.State))
	return s.deadLetter(ctx, d, res)
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
// unless its hold is over.
func (s *Service) spill(ctx context.Context, r *kgo.Record, d *hooklinev1.Delivery, at time.Time, reason string) []*kgo.Record {
	if end := s.endHold(ctx, d, s.now()); end != nil {
		return end
	}
	s.deferred(ctx, reason)
	return s.deferTo(r, d, at)
}
