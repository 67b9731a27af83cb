// Package decide holds the dispatcher's decision of what follows an
// attempt: delivered, retried (and when), or ended (failed or expired,
// and whether the end may block an ordered lane). It is pure: no I/O, no
// clock of its own, no records; the dispatcher turns a Decision into the
// results, retries, dead letters and lane blocks it writes
// (dispatcher/outcome.go). What an attempt itself was (its outcome
// class, status, Retry-After) is the attempt package's.
package decide

import (
	"fmt"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/classify"
	"github.com/hookline/hookline/sdk/backoff"
	"github.com/hookline/hookline/services/dispatcher/attempt"
	"github.com/hookline/hookline/services/dispatcher/retryafter"
)

// Then is what follows an attempt.
type Then uint8

const (
	// Deliver: the receiver took it (DELIVERED).
	Deliver Then = iota
	// Retry: another attempt at Decision.Next (RETRY_SCHEDULED).
	Retry
	// EndHead: a terminal failure (FAILED or EXPIRED) that dead-letters
	// the delivery, or blocks its ordered lane when its endpoint blocks
	// on a head's failure.
	EndHead
	// DeadLetter: a terminal failure that never blocks a lane (a resend
	// or a test event: one attempt, R-REPLAY-1).
	DeadLetter
)

// Rules are the service-wide defaults an endpoint's retry policy
// overrides.
type Rules struct {
	MaxAttempts   uint32        // --max-attempts
	MaxAge        time.Duration // --max-age
	RetryAfterMax time.Duration // --retry-after-max: the longest Retry-After honoured
}

// Attempts is the endpoint's attempt budget: its retry policy's, or
// the default.
func (r Rules) Attempts(ep *hooklinev1.EndpointRecord) uint32 {
	if n := ep.GetEndpoint().GetRetryPolicy().GetMaxAttempts(); n > 0 {
		return n
	}
	return r.MaxAttempts
}

// Age is how long after its first attempt a delivery of the endpoint may
// still be attempted: its retry policy's, or the default.
func (r Rules) Age(ep *hooklinev1.EndpointRecord) time.Duration {
	if d := ep.GetEndpoint().GetRetryPolicy().GetMaxAge(); d != nil && d.AsDuration() > 0 {
		return d.AsDuration()
	}
	return r.MaxAge
}

// Decision is what follows one attempt.
type Decision struct {
	Then   Then
	State  hooklinev1.DeliveryState
	Reason string    // why it ended ("" when delivered or retried)
	Log    string    // the log line's message for an end
	Next   time.Time // when the next attempt is due (Retry)
}

// After decides what follows attempt ar of delivery d to endpoint ep.
// rnd draws the backoff's jitter.
func After(d *hooklinev1.Delivery, ep *hooklinev1.EndpointRecord, ar attempt.Result, r Rules, rnd backoff.Rand) Decision {
	if ar.Class == hooklinev1.OutcomeClass_OUTCOME_CLASS_SUCCESS {
		return Decision{Then: Deliver, State: hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED}
	}
	failed := hooklinev1.DeliveryState_DELIVERY_STATE_FAILED
	switch {
	case !classify.Retryable(ar.Class):
		return Decision{Then: EndHead, State: failed, Reason: "permanent failure", Log: "delivery failed permanently"}
	case d.GetKind() == hooklinev1.DeliveryKind_DELIVERY_KIND_RESEND, d.GetKind() == hooklinev1.DeliveryKind_DELIVERY_KIND_TEST:
		return Decision{Then: DeadLetter, State: failed, Reason: "one-off attempt failed; resends and test events are not retried",
			Log: "one-off attempt failed; not retried"}
	}
	if d.GetAttempt() >= r.Attempts(ep) {
		return Decision{Then: EndHead, State: failed, Reason: fmt.Sprintf("gave up after %d attempts", d.GetAttempt()), Log: "delivery out of attempts"}
	}
	ended := ar.Started.Add(ar.Latency)
	wait := backoff.FromProto(ep.GetEndpoint().GetRetryPolicy(), backoff.Default).Delay(d.GetAttempt(), rnd)
	if retryafter.Honoured(ar.StatusCode) {
		// The later of the receiver's ask and our backoff wins; an
		// unparsable ask is ignored, a huge one capped.
		if ra, ok := retryafter.Parse(ar.RetryAfter, ended, r.RetryAfterMax); ok && ra > wait {
			wait = ra
		}
	}
	next := ended.Add(wait)
	if giveUp := d.GetGiveUpAt(); giveUp != nil && next.After(giveUp.AsTime()) {
		return Decision{Then: EndHead, State: hooklinev1.DeliveryState_DELIVERY_STATE_EXPIRED,
			Reason: fmt.Sprintf("next attempt would be after the give-up time %s", giveUp.AsTime().UTC().Format(time.RFC3339)),
			Log:    "delivery out of time"}
	}
	return Decision{Then: Retry, State: hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED, Next: next}
}
