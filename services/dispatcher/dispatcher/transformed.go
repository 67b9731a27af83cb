package dispatcher

import (
	"context"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/sdk/ids"
	"github.com/hookline/hookline/services/dispatcher/attempt"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Transformations (DESIGN I43) ran once at fan-out, in ingest: a
// delivery record carries the transformed body as its payload and, in
// Delivery.transformed, the url, method and headers its attempts use, or
// the outcome of a run that cancelled or failed. The record's MAC covers
// all of it (platform/keyring), so triage has already refused one that
// was altered. A changed url is dialled through the same SSRF guard as
// any endpoint URL (the tenant's guard checks every dial).

// transformed returns r with t's overrides: url, method and headers.
// Reserved headers never reach here (ingest refuses them), and the
// attempt sets its own (signature, content type, tracing) after these.
func transformed(r attempt.Request, t *hooklinev1.Transformed) attempt.Request {
	if t == nil {
		return r
	}
	if u := t.GetUrl(); u != "" {
		r.URL = u
	}
	r.Method = t.GetMethod()
	for k, v := range t.GetHeaders() {
		r.Header.Set(k, v)
	}
	return r
}

// transformationEnded reports whether d's transformation cancelled or
// failed it at fan-out: it ends without an attempt.
func transformationEnded(d *hooklinev1.Delivery) bool {
	t := d.GetTransformed()
	return t.GetCancelled() || t.GetError() != ""
}

// endTransformed ends d, whose transformation cancelled or failed it:
// CANCELLED (a result, no dead letter) or FAILED with the run's error (a
// result and a dead letter), through the same terminal path as any
// other end, so each accepted delivery has exactly one terminal result.
// The failure that starts ep's failing streak adds an
// endpoint.transformation_failing notice, in the same transaction; a
// cancel is a script that ran and ends the streak.
func (h *handler) endTransformed(ctx context.Context, d *hooklinev1.Delivery, ep *hooklinev1.EndpointRecord, now time.Time) []*kgo.Record {
	res := h.writer.result(d, now)
	if d.GetTransformed().GetCancelled() {
		h.streaks.succeeded(d.GetEndpointId())
		res.State = hooklinev1.DeliveryState_DELIVERY_STATE_CANCELLED
		res.Reason = "cancelled by the endpoint's transformation"
		h.writer.finished(ctx, res.State)
		setOutcome(ctx, "transformation_cancelled")
		return h.writer.resultRecords(ctx, d, res)
	}
	res.State = hooklinev1.DeliveryState_DELIVERY_STATE_FAILED
	res.Class = hooklinev1.OutcomeClass_OUTCOME_CLASS_PERMANENT
	res.Reason = d.GetTransformed().GetError()
	res.Error = res.Reason
	setOutcome(ctx, "transformation_failed")
	out := h.writer.deadLetter(ctx, d, res)
	e := ep.GetEndpoint()
	if h.streaks.failed(e.GetId(), e.GetTransformation()) {
		out = append(out, h.writer.records(h.topics.Notices, e.GetId(), &hooklinev1.Notice{
			NoticeId: ids.New(ids.Notice, now), Type: hooklinev1.NoticeType_NOTICE_TYPE_TRANSFORMATION_FAILING,
			TenantId: e.GetTenantId(), EndpointId: e.GetId(), At: timestamppb.New(now),
			Detail: res.GetReason(), DeliveryId: d.GetDeliveryId(),
		})...)
	}
	return out
}
