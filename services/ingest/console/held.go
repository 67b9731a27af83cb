package console

import (
	"fmt"
	"strconv"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/sdk/sign"
)

// heldAfter is how long past its due time a scheduled retry with no
// newer result counts as held: the scheduler releases retries on time,
// so one this late was looked at and held back by the dispatcher (a hold
// writes no result), in outage mode or because its endpoint's backlog
// was spilled.
const heldAfter = 10 * time.Second

// Held says why d waits without being attempted, as of now: "held:
// paused …" for a parked delivery, "held: outage mode …" for a retry
// long past its due time; "" when it is not held.
func Held(d *hooklinev1.DeliveryStatus, now time.Time) string {
	switch d.GetState() {
	case hooklinev1.DeliveryState_DELIVERY_STATE_PARKED:
		why := "held: paused — it is attempted when the endpoint is resumed, with its attempts intact"
		if r := d.GetReason(); r != "" {
			why += " (" + r + ")"
		}
		return why
	case hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED:
		due := d.GetNextAttemptAt()
		if due == nil || now.Sub(due.AsTime()) <= heldAfter {
			return ""
		}
		return fmt.Sprintf("held: outage mode — the retry due at %s was held back without spending an attempt: the endpoint keeps failing, so the dispatcher probes it with one delivery at a time (at most every --outage-recheck, 2 m by default) and sends the held ones once a probe succeeds; next look by %s",
			due.AsTime().UTC().Format("15:04:05Z"), now.Add(2*time.Minute).UTC().Format("15:04:05Z"))
	}
	return ""
}

// header is one request header of an attempt.
type header struct{ Name, Value string }

// requestHeaders are the headers the dispatcher sent with attempt a (see
// services/dispatcher/attempt): rebuilt from what the result keeps, so
// the signature, computed per attempt and not kept, is shown as its
// scheme only, and the endpoint's own headers are not listed.
func requestHeaders(a *hooklinev1.AttemptResult) []header {
	if a.GetStartedAt() == nil || a.GetAttempt() == 0 {
		return nil
	}
	hs := []header{
		{"content-type", "application/json"},
		{sign.HeaderID, a.GetEventId()},
		{sign.HeaderTimestamp, strconv.FormatInt(a.GetStartedAt().AsTime().Unix(), 10)},
		{sign.HeaderSignature, "v1,… or v1a,… (computed per attempt with the endpoint's secret; not kept)"},
	}
	if t := a.GetEventType(); t != "" {
		hs = append(hs, header{"webhook-event-type", t})
	}
	if a.GetTraceId() != "" && a.GetSpanId() != "" {
		hs = append(hs, header{"traceparent", "00-" + a.GetTraceId() + "-… (this attempt's trace)"})
	}
	return hs
}
