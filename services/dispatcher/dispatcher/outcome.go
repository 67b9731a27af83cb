package dispatcher

import (
	"context"
	"fmt"
	"log/slog"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/sdk/ids"
	"github.com/hookline/hookline/services/dispatcher/attempt"
	"github.com/hookline/hookline/services/dispatcher/decide"
	"github.com/hookline/hookline/services/dispatcher/health"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// outcome turns an attempt's result into the records that follow it.
func (a *attempter) outcome(ctx context.Context, d *hooklinev1.Delivery, ep *hooklinev1.EndpointRecord, ar attempt.Result) []*kgo.Record {
	// The result reports the attempt's HTTP span; logs stay on the
	// process span.
	rctx := ctx
	if ar.SpanContext.IsValid() {
		rctx = trace.ContextWithSpanContext(ctx, ar.SpanContext)
	}
	res := a.writer.result(d, ar.Started)
	defer func() { setOutcome(ctx, outcomeLabel(res.GetState())) }()
	res.Attempt = d.GetAttempt()
	res.Class = ar.Class
	res.StatusCode = int32(ar.StatusCode)
	res.Latency = durationpb.New(ar.Latency)
	res.ResponseExcerpt = ar.Excerpt
	res.Url = ep.GetEndpoint().GetUrl()
	if ar.Err != nil {
		res.Error = ar.Err.Error()
	}
	key := d.GetEndpointId()
	notices := a.health(ctx, ep, d.GetDeliveryId(), ar)
	if d.GetTransformed() != nil {
		// Its transformation succeeded at fan-out: a failing streak is over.
		a.streaks.succeeded(key)
	}
	dec := decide.After(d, ep, ar, a.cfg.rules(), a.rand) // what follows: a pure decision (decide)
	res.State, res.Reason = dec.State, dec.Reason
	if dec.Then == decide.Deliver {
		a.writer.finished(ctx, res.State)
		if a.log.Enabled(ctx, slog.LevelDebug) {
			a.deliveryLog(d, ar).DebugContext(ctx, "delivered", "latency", ar.Latency)
		}
		return append(a.writer.resultRecords(rctx, d, res), notices...)
	}
	// Only failures are logged: the logger is built off the success path,
	// where it was a fifth of the dispatcher's allocations.
	log := a.deliveryLog(d, ar)
	switch dec.Then {
	case decide.EndHead:
		return append(a.headFailed(ctx, rctx, log, dec.Log, d, ep, res), notices...)
	case decide.DeadLetter:
		log.InfoContext(ctx, dec.Log, "err", res.Error)
		return append(a.writer.deadLetter(rctx, d, res), notices...)
	}
	next := dec.Next
	res.NextAttemptAt = timestamppb.New(next)
	retry := proto.Clone(d).(*hooklinev1.Delivery)
	retry.Attempt++
	retry.DueAt = res.NextAttemptAt
	retry.HeldSince = nil     // an attempt ends any hold
	retry.PayloadRecord = nil // and the retry carries the payload read back
	retry.Kind = hooklinev1.DeliveryKind_DELIVERY_KIND_RETRY
	a.metrics.retry(ctx, d.GetAttempt())
	log.LogAttrs(ctx, slog.LevelInfo, "retry scheduled", slog.Time("next_attempt_at", next), slog.String("err", res.Error))
	retryRec := a.writer.records(a.topics.Retries, key, retry)
	if ar.SpanContext.IsValid() {
		// The next attempt's span links to this one.
		retryRec[0].Headers = append(retryRec[0].Headers, kgo.RecordHeader{Key: headerLastAttempt, Value: []byte(traceparent(ar.SpanContext))})
	}
	return append(append(a.writer.resultRecords(rctx, d, res), retryRec...), notices...)
}

// deliveryLog is the logger of one attempt's outcome.
func (a *attempter) deliveryLog(d *hooklinev1.Delivery, ar attempt.Result) *slog.Logger {
	return a.log.With("delivery_id", d.GetDeliveryId(), "event_id", d.GetEventId(), "endpoint_id", d.GetEndpointId(),
		"attempt", d.GetAttempt(), "status", ar.StatusCode, "class", ar.Class.String())
}

// health updates the endpoint's failure streak with this attempt and
// returns the notices it calls for (R-ENDPOINT-3), and, at the
// auto-pause threshold (R-RECV-4), the endpoint record that pauses it.
func (a *attempter) health(ctx context.Context, ep *hooklinev1.EndpointRecord, deliveryID string, ar attempt.Result) []*kgo.Record {
	e := ep.GetEndpoint()
	now := ar.Started.Add(ar.Latency)
	th := a.thresholds()
	if e.GetOutageModeDisabled() {
		th.OutageAfter = 0
	}
	a.rcv.Changed(e.GetId(), ep.GetVersion())
	ev := a.rcv.Observe(e.GetId(), deliveryID, ar.Class == hooklinev1.OutcomeClass_OUTCOME_CLASS_SUCCESS,
		ar.Class == hooklinev1.OutcomeClass_OUTCOME_CLASS_PERMANENT, now, th)
	notice := func(t hooklinev1.NoticeType, reminder bool, detail string) *hooklinev1.Notice {
		n := &hooklinev1.Notice{
			NoticeId: ids.New(ids.Notice, now), Type: t, TenantId: e.GetTenantId(), EndpointId: e.GetId(),
			At: timestamppb.New(now), Reminder: reminder, Detail: detail,
		}
		if t == hooklinev1.NoticeType_NOTICE_TYPE_ENDPOINT_FAILING {
			n.Outage = a.rcv.InOutage(e.GetId()) // what the next owner resumes (health/notices.go)
		}
		return n
	}
	var out []*kgo.Record
	switch ev {
	case health.None:
		return nil
	case health.Failing:
		out = a.writer.records(a.topics.Notices, e.GetId(), notice(hooklinev1.NoticeType_NOTICE_TYPE_ENDPOINT_FAILING, false,
			fmt.Sprintf("%d consecutive failed attempts; last: %s", a.cfg.FailingAfter, describe(ar))))
	case health.Reminder:
		out = a.writer.records(a.topics.Notices, e.GetId(), notice(hooklinev1.NoticeType_NOTICE_TYPE_ENDPOINT_FAILING, true,
			"still failing; last: "+describe(ar)))
	case health.Recovered:
		out = a.writer.records(a.topics.Notices, e.GetId(), notice(hooklinev1.NoticeType_NOTICE_TYPE_ENDPOINT_RECOVERED, false, "delivered again"))
	case health.AutoPause:
		paused := proto.Clone(ep).(*hooklinev1.EndpointRecord)
		paused.Version++
		paused.Endpoint.Status = hooklinev1.EndpointStatus_ENDPOINT_STATUS_PAUSED
		paused.Endpoint.PausedAt = timestamppb.New(now)
		paused.Endpoint.PausedReason = fmt.Sprintf("paused by Hookline after %d consecutive permanent failures", a.cfg.AutoPauseAfter)
		paused.Endpoint.UpdatedAt = paused.Endpoint.PausedAt
		// Not applied to the local view: it takes effect when the view
		// reads it from the log, committed, if it wins (autopause.go).
		pause := a.writer.records(a.topics.Endpoints, e.GetId(), paused)
		a.trackPause(e.GetId(), pause[0])
		a.log.WarnContext(ctx, "endpoint paused automatically", "endpoint_id", e.GetId(), "reason", paused.Endpoint.PausedReason)
		out = append(pause,
			a.writer.records(a.topics.Notices, e.GetId(), notice(hooklinev1.NoticeType_NOTICE_TYPE_ENDPOINT_PAUSED, false, paused.Endpoint.PausedReason))...)
	}
	return out
}

// thresholds are the dispatcher's health thresholds, from its
// configuration (--failing-after, --outage-after, --auto-pause-after,
// --remind-every). Read from s.cfg (a.cfg, by pointer) at each outcome,
// so that s.cfg stays their one source (tests change it after New).
func (a *attempter) thresholds() health.Thresholds {
	return health.Thresholds{
		FailingAfter:   a.cfg.FailingAfter,
		OutageAfter:    a.cfg.OutageAfter,
		AutoPauseAfter: a.cfg.AutoPauseAfter,
		RemindEvery:    a.cfg.RemindEvery,
	}
}

func describe(ar attempt.Result) string {
	if ar.Err != nil {
		return ar.Err.Error()
	}
	return fmt.Sprintf("HTTP %d", ar.StatusCode)
}

// rules are the defaults an endpoint's retry policy overrides.
func (c *Config) rules() decide.Rules {
	return decide.Rules{MaxAttempts: c.MaxAttempts, MaxAge: c.MaxAge, RetryAfterMax: c.RetryAfterMax}
}
