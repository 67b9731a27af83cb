package dispatcher

import (
	"context"
	"log/slog"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/telemetry"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kotel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// recordWriter builds the Kafka records that follow a delivery (its
// result, its retry or deferral, its dead letter) and checks them against
// what Kafka will take (produce.go): a delivery whose records can never
// be written is set aside, and the deliveries a broker refused a record
// of are marked so that they are set aside when they come again. It
// counts the deliveries that end or are deferred, logs a deferral or a
// set-aside, and does no I/O of its own: what it returns is written by
// the commit (commit.go). It holds only what that takes, handed over by
// New once the options are applied; the handler and the attempter
// (handle.go) decide what follows a delivery and ask it for the records.
type recordWriter struct {
	topics  hkafka.Topics
	log     *slog.Logger
	now     func() time.Time
	metrics instruments
	// setAsideHook, if set, learns of each delivery set aside (tests;
	// WithSetAside).
	setAsideHook func(*hooklinev1.Delivery)
	// unwritable are deliveries a broker refused a record of (marked by
	// blameAbort on the commit goroutines, one at a time; forgotten by a
	// fresh session).
	unwritable hkafka.Unwritables
}

func (w *recordWriter) result(d *hooklinev1.Delivery, at time.Time) *hooklinev1.AttemptResult {
	return &hooklinev1.AttemptResult{
		DeliveryId: d.GetDeliveryId(),
		EventId:    d.GetEventId(),
		TenantId:   d.GetTenantId(),
		EndpointId: d.GetEndpointId(),
		EventType:  d.GetEventType(),
		StartedAt:  timestamppb.New(at),
	}
}

// records encodes m for topic. Encoding a message Hookline built cannot
// fail short of a bug, which surfaces as a worker fault.
func (w *recordWriter) records(topic, key string, m proto.Message) []*kgo.Record {
	r, err := hkafka.Record(topic, key, m)
	if err != nil {
		panic(err)
	}
	return []*kgo.Record{r}
}

// resultRecords encodes res, a result of d, for the results topic as
// the report of the span in ctx (the attempt's HTTP span, or the process
// span when no attempt was made): its trace_id and span_id fields and
// the record's traceparent header name that span. A batch's result is
// each member's (batch.go).
func (w *recordWriter) resultRecords(ctx context.Context, d *hooklinev1.Delivery, res *hooklinev1.AttemptResult) []*kgo.Record {
	sc := trace.SpanContextFromContext(ctx)
	if sc.IsValid() {
		res.TraceId, res.SpanId = sc.TraceID().String(), sc.SpanID().String()
	}
	if d.GetBatch() != nil {
		return w.memberResults(ctx, d, res)
	}
	out := w.records(w.topics.Results, res.GetEndpointId(), res)
	if sc.IsValid() {
		telemetry.Propagator.Inject(ctx, kotel.NewRecordCarrier(out[0]))
	}
	return out
}

// stampTrace makes the records that carry r's delivery on (retries,
// deferrals, requeues, dead letters) carry its trace headers, unless
// they set their own.
func (w *recordWriter) stampTrace(r *kgo.Record, outs []*kgo.Record) {
	for _, o := range outs {
		if !w.carriesOn(o.Topic) && o.Topic != w.topics.Dead {
			continue
		}
		for _, k := range traceHeaders {
			if header(o, k) == "" {
				if v := header(r, k); v != "" {
					o.Headers = append(o.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
				}
			}
		}
	}
}

// deferTo sends a delivery back through the scheduler, due at, with no
// attempt counted and its headers (trace context) kept, held by
// reference: its payload stays in r (hold.go). Callers check first that
// its hold may go on (endHold).
func (w *recordWriter) deferTo(r *kgo.Record, d *hooklinev1.Delivery, at time.Time) []*kgo.Record {
	return w.deferAs(r, d, heldCopy(r, d), at)
}

// deferAs sends later, d's record to defer, back through the scheduler
// due at (deferTo; spill).
func (w *recordWriter) deferAs(r *kgo.Record, d, later *hooklinev1.Delivery, at time.Time) []*kgo.Record {
	later.DueAt = timestamppb.New(at)
	later.HeldSince = holdStart(d, w.now())
	later.Kind = hooklinev1.DeliveryKind_DELIVERY_KIND_DEFERRED
	out := w.records(w.topics.Retries, d.GetEndpointId(), later)
	out[0].Headers = append(out[0].Headers, r.Headers...)
	return out
}

func (w *recordWriter) deadLetter(ctx context.Context, d *hooklinev1.Delivery, res *hooklinev1.AttemptResult) []*kgo.Record {
	w.finished(ctx, res.GetState())
	out := w.resultRecords(ctx, d, res) // sets the trace ids the dead letter repeats
	if d.GetBatch() != nil {
		return append(out, w.memberDeadLetters(d, res)...)
	}
	dl := &hooklinev1.DeadLetter{Delivery: d, LastResult: res, DeadAt: timestamppb.New(w.now())}
	return append(out, w.records(w.topics.Dead, d.GetEndpointId(), dl)...)
}

// deferred counts a deferral, logs it at debug level and notes it on
// the process span.
func (w *recordWriter) deferred(ctx context.Context, d *hooklinev1.Delivery, reason string) {
	w.metrics.deferral(ctx, reason)
	w.log.DebugContext(ctx, "deferred", "delivery_id", d.GetDeliveryId(), "endpoint_id", d.GetEndpointId(), "attempt", d.GetAttempt(), "reason", reason)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.String("hookline.outcome", "deferred"), attribute.String("hookline.deferred.reason", reason))
	}
}

// finished counts a delivery that reached a final state.
func (w *recordWriter) finished(ctx context.Context, st hooklinev1.DeliveryState) {
	w.metrics.delivery(ctx, st)
}

// fit returns outs, or, when one of them is over recordLimit, what
// setAside makes of r's delivery instead.
func (w *recordWriter) fit(ctx context.Context, r *kgo.Record, outs []*kgo.Record) []*kgo.Record {
	why := ""
	for _, o := range outs {
		if why = hkafka.OverLimit(o); why != "" {
			break
		}
	}
	if why == "" {
		return outs
	}
	d, err := decodeDelivery(r)
	if err != nil {
		return outs // a raw copy of the input: it was written once
	}
	return w.setAside(ctx, d, outs, why)
}

// setAside ends d FAILED because a record it needs can never be written:
// a result (the attempt's, if outs hold one) and a DeadLetter without the
// payload (ingest's index keeps the payload from the deliveries topic,
// so it can still be resent or recovered), plus the outputs that are
// not the delivery's (notices, an automatic pause).
func (w *recordWriter) setAside(ctx context.Context, d *hooklinev1.Delivery, outs []*kgo.Record, why string) []*kgo.Record {
	var keep []*kgo.Record
	var res *hooklinev1.AttemptResult
	for _, o := range outs {
		switch o.Topic {
		case w.topics.Notices, w.topics.Endpoints:
			keep = append(keep, o)
		case w.topics.Results:
			ar := new(hooklinev1.AttemptResult)
			if proto.Unmarshal(o.Value, ar) == nil {
				res = ar
			}
		}
	}
	if res == nil {
		res = w.result(d, w.now())
		res.Attempt = d.GetAttempt()
	}
	res.State = hooklinev1.DeliveryState_DELIVERY_STATE_FAILED
	res.NextAttemptAt = nil
	res.Reason = "its records cannot be written to Kafka (" + why + "); dead-lettered without its payload"
	small := proto.Clone(d).(*hooklinev1.Delivery)
	small.Payload = nil
	w.log.ErrorContext(ctx, "delivery cannot be written to Kafka; dead-lettered without its payload",
		"delivery_id", d.GetDeliveryId(), "endpoint_id", d.GetEndpointId(), "attempt", d.GetAttempt(), "why", why)
	setOutcome(ctx, "unwritable")
	if w.setAsideHook != nil {
		w.setAsideHook(d)
	}
	return append(w.deadLetter(ctx, small, res), keep...)
}

// unwritableReason says why r's delivery was marked unwritable, or "".
func (w *recordWriter) unwritableReason(r *kgo.Record) (*hooklinev1.Delivery, string) {
	if !w.unwritable.Any() {
		return nil, ""
	}
	d, err := decodeDelivery(r)
	if err != nil {
		return nil, ""
	}
	return d, w.unwritableOf(d)
}

// classifyAbort marks the deliveries whose records a broker refused for
// what they are (hkafka.Blame; they are set aside when they come again)
// and names the abort's reason.
func (w *recordWriter) classifyAbort(failed []refused, now time.Time) string {
	reason, _ := w.blameAbort(failed, now)
	return reason
}

// blameAbort is classifyAbort that also returns the deliveries it
// blamed, by id: the commit forgets only their partitions (committed).
func (w *recordWriter) blameAbort(failed []refused, now time.Time) (string, map[string]string) {
	reason, blamed := hkafka.Blame(failed, w.deliveryOf)
	for id, why := range blamed {
		w.unwritable.Mark(id, why, now)
	}
	w.blameMembers(failed, blamed, now)
	return reason, blamed
}

// carriesOn reports whether a record to topic carries its delivery on,
// to be attempted later: a retry, a deferral, a requeue, a park.
func (w *recordWriter) carriesOn(topic string) bool {
	return topic == w.topics.Retries || topic == w.topics.Deliveries || topic == w.topics.Parked
}

// deliveryOf returns the id of the delivery an output record is about.
func (w *recordWriter) deliveryOf(r *kgo.Record) string {
	switch r.Topic {
	case w.topics.Retries, w.topics.Deliveries, w.topics.Parked:
		if d, err := decodeDelivery(r); err == nil {
			return d.GetDeliveryId()
		}
	case w.topics.Dead:
		var dl hooklinev1.DeadLetter
		if hkafka.Decode(r, &dl) == nil && dl.GetDelivery().GetDeliveryId() != "" {
			return dl.GetDelivery().GetDeliveryId()
		}
		if d, err := decodeDelivery(r); err == nil { // a raw copy
			return d.GetDeliveryId()
		}
	case w.topics.Results:
		var ar hooklinev1.AttemptResult
		if hkafka.Decode(r, &ar) == nil {
			return ar.GetDeliveryId()
		}
	case w.topics.Notices:
		var n hooklinev1.Notice
		if hkafka.Decode(r, &n) == nil {
			return n.GetDeliveryId()
		}
	case w.topics.Lanes:
		// A lane's record grows with its blocked head and the members
		// that went outside: blame the head (set aside when it comes
		// again, it leaves the record), else the last member.
		var rec hooklinev1.LaneRecord
		if r.Value == nil || hkafka.Decode(r, &rec) != nil {
			return ""
		}
		var last *hooklinev1.LaneMember
		for _, m := range rec.GetOutside() {
			if m.GetBlocked() != nil {
				return m.GetDeliveryId()
			}
			if last == nil || m.GetLaneSeq() > last.GetLaneSeq() {
				last = m
			}
		}
		return last.GetDeliveryId()
	}
	return ""
}
