package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/keyring"
	"github.com/hookline/hookline/sdk/backoff"
	"github.com/hookline/hookline/services/dispatcher/attempt"
	"github.com/hookline/hookline/services/dispatcher/health"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// A delivery record's fate is decided in three steps, each a function
// here that the loop and the tests share:
//
//  1. triage (before its lane): not yet due, endpoint unknown, deleted,
//     of another tenant, or paused — settled at once with no attempt —
//     or it waits in its endpoint's lane;
//  2. gate (when its lane may start it): outage mode holds it or makes it
//     the probe;
//  3. attempt: sign, POST, classify, and the records that follow.

// Record headers the dispatcher sets.
const (
	// headerPoison marks a record copied raw to the dead-letter topic
	// because it cannot be handled; its value says why. Such a record is
	// the raw input, not a DeadLetter message.
	headerPoison = "hookline-poison"
	// headerFaults counts the worker faults a delivery record has caused.
	headerFaults = "hookline-worker-faults"
	// headerPutBack marks a record the dispatcher put back unchanged (an
	// attempt interrupted by a shutdown, an endpoints view that would not
	// sync): its value names where the record it copies was read
	// ("partition/offset"), so a put-back never shares its original's
	// copy key and is never skipped as a copy of it (I28).
	headerPutBack = "hookline-put-back"
)

// verdict is triage's decision.
type verdict uint8

const (
	toLane         verdict = iota // waits in its endpoint's lane
	notDue                        // held in memory until due, or back to the retries topic (early.go)
	needSync                      // endpoint unknown: sync the endpoints view, then triage again
	epDeleted                     // endpoint deleted: a final result
	epForeign                     // the delivery's tenant does not own the endpoint: dead-lettered
	epPaused                      // held without an attempt (park)
	transformEnded                // its transformation cancelled or failed at fan-out: a final result, no attempt (transformed.go)
)

// decodeDelivery reads a delivery record.
func decodeDelivery(r *kgo.Record) (*hooklinev1.Delivery, error) {
	d := new(hooklinev1.Delivery)
	if err := hkafka.Decode(r, d); err != nil {
		return nil, err
	}
	if d.GetDeliveryId() == "" {
		return nil, errors.New("not a Delivery: no delivery id")
	}
	restoreDue(r, d) // early.go
	return d, nil
}

// triage decides what becomes of d before it waits in its endpoint's
// lane. synced says the endpoints view was synced for it already, so an
// endpoint still unknown is deleted.
func (s *Service) triage(d *hooklinev1.Delivery, now time.Time, synced bool) (verdict, *hooklinev1.EndpointRecord) {
	if due := d.GetDueAt(); due != nil && due.AsTime().After(now) {
		// Never fire early: a delivery not yet due waits, in memory when
		// it is due within the early hold, else on the retries topic
		// (early.go).
		return notDue, nil
	}
	ep := s.store.Get(d.GetEndpointId())
	switch {
	case ep == nil && !synced:
		// Unknown here: maybe created a moment ago and not read yet.
		return needSync, nil
	case ep == nil:
		return epDeleted, nil
	case ep.GetEndpoint().GetTenantId() != d.GetTenantId(), !s.authentic(d):
		// The deliveries topic must not be a signing oracle: only the
		// tenant that owns an endpoint delivers to it, and only through
		// ingest (recordauth.go).
		return epForeign, ep
	case transformationEnded(d):
		return transformEnded, ep
	case ep.GetEndpoint().GetStatus() == hooklinev1.EndpointStatus_ENDPOINT_STATUS_PAUSED:
		return epPaused, ep
	}
	return toLane, ep
}

// settle returns the records that end a delivery triage did not send to
// its lane.
func (s *Service) settle(ctx context.Context, v verdict, r *kgo.Record, d *hooklinev1.Delivery, ep *hooklinev1.EndpointRecord, now time.Time) []*kgo.Record {
	if d != nil {
		annotate(ctx, d)
	}
	switch v {
	case notDue:
		setOutcome(ctx, "not_due")
		return s.notYetDue(ctx, r, d, now)
	case epDeleted:
		res := s.writer.result(d, now)
		res.State = hooklinev1.DeliveryState_DELIVERY_STATE_ENDPOINT_DELETED
		res.Reason = "endpoint deleted"
		s.writer.finished(ctx, res.State)
		setOutcome(ctx, outcomeLabel(res.State))
		return s.writer.resultRecords(ctx, res)
	case epForeign:
		res := s.writer.result(d, now)
		res.State = hooklinev1.DeliveryState_DELIVERY_STATE_FAILED
		res.Reason = s.refusedReason(d)
		s.log.ErrorContext(ctx, "delivery refused; dead-lettered", "reason", res.Reason, "delivery_id", d.GetDeliveryId(), "endpoint_id", d.GetEndpointId())
		setOutcome(ctx, "foreign_endpoint")
		return s.writer.deadLetter(ctx, d, res)
	case epPaused:
		return s.holds.park(ctx, r, d, now)
	case transformEnded:
		return s.endTransformed(ctx, d, ep, now)
	}
	return []*kgo.Record{s.workerFault(ctx, r, "not a Delivery")}
}

// gate is outage mode's decision for d when its lane may start it. An
// operator's resend or test event is attempted now, outage or not.
func (s *Service) gate(d *hooklinev1.Delivery, ep *hooklinev1.EndpointRecord, now time.Time) (health.Gate, time.Time) {
	oneOff := d.GetKind() == hooklinev1.DeliveryKind_DELIVERY_KIND_RESEND || d.GetKind() == hooklinev1.DeliveryKind_DELIVERY_KIND_TEST
	if ep.GetEndpoint().GetOutageModeDisabled() || oneOff {
		return health.Pass, time.Time{}
	}
	preferred := d.GetAttempt() == 1 || isOrdered(ep, d)
	return s.rcv.OutageGate(ep.GetEndpoint().GetId(), now, preferred, s.cfg.OutageRecheck)
}

// process runs fn as the handling of record r: inside r's process span,
// with its trace headers copied onto the outputs, and a panic turned into
// a worker fault (R-CLASS-3): the delivery goes back to the deliveries
// topic exactly as it came, with no attempt counted and no due time
// pushed. A record that keeps faulting (MaxFaults times) is set aside raw
// on the dead-letter topic rather than loop forever.
//
// Outputs that can never be written are not handed on (produce.go): a
// delivery a broker refused a record of is set aside at once, without a
// second attempt, and one whose outputs are over the record limit is set
// aside instead of writing them.
func (s *Service) process(ctx context.Context, r *kgo.Record, fn func(context.Context) []*kgo.Record) (out []*kgo.Record) {
	ctx, span := s.startProcess(ctx, r)
	defer func() {
		if p := recover(); p != nil {
			out = s.faulted(ctx, r, fmt.Sprint(p))
			setOutcome(ctx, "worker_fault")
			span.SetStatus(codes.Error, fmt.Sprint(p))
		}
		s.writer.stampTrace(r, out)
		span.End()
	}()
	if d, why := s.writer.unwritableReason(r); why != "" {
		return s.writer.setAside(ctx, d, nil, why)
	}
	return s.writer.fit(ctx, r, fn(ctx))
}

// handleSafely is one record's whole handling outside the loop: triage,
// gate and attempt, with no lane (so no cap or rate). Tests and
// benchmarks use it; the loop runs the same steps with lanes between.
func (s *Service) handleSafely(ctx context.Context, r *kgo.Record) []*kgo.Record {
	return s.process(ctx, r, func(ctx context.Context) []*kgo.Record { return s.handle(ctx, r) })
}

func (s *Service) handle(ctx context.Context, r *kgo.Record) []*kgo.Record {
	d, err := decodeDelivery(r)
	if err != nil {
		return []*kgo.Record{s.workerFault(ctx, r, err.Error())}
	}
	if isLaneCommand(d) {
		return nil // only the engine's lanes apply one (lanecmd.go)
	}
	now := s.now()
	v, ep := s.triage(d, now, false)
	if v == needSync {
		if err := s.syncEndpoints(ctx); err != nil {
			return []*kgo.Record{requeue(r, s.topics.Deliveries)}
		}
		v, ep = s.triage(d, now, true)
	}
	if v != toLane {
		return s.settle(ctx, v, r, d, ep, now)
	}
	g, until := s.gate(d, ep, now)
	if g == health.Hold {
		return s.holds.hold(ctx, r, d, until)
	}
	var p *health.ProbeTurn
	if g == health.Probe {
		p = s.rcv.Turn(ep.GetEndpoint().GetId())
		defer func() { p.Over(s.now()) }() // however the handling ends
	}
	return s.attempt(ctx, r, d, ep, p)
}

// attemptRecord is the handling of r by one attempt of d to ep, as the
// loop runs it once d's lane started it (process: spans, panics,
// records that cannot be written). probe says outage mode let d through
// as ep's one probe: the probe's end is recorded here, around process,
// so that every way out of it — set aside before the attempt, held for
// an unusable secret, a panic, interrupted, an outcome — ends the probe
// (DESIGN.md: every probe ends).
func (s *Service) attemptRecord(ctx context.Context, r *kgo.Record, d *hooklinev1.Delivery, ep *hooklinev1.EndpointRecord, probe bool) []*kgo.Record {
	var p *health.ProbeTurn
	if probe {
		p = s.rcv.Turn(ep.GetEndpoint().GetId())
		defer func() { p.Over(s.now()) }()
	}
	return s.process(ctx, r, func(ctx context.Context) []*kgo.Record { return s.attempt(ctx, r, d, ep, p) })
}

// syncEndpoints waits until the endpoints view holds every endpoint
// written before the call. A failure is an infrastructure error, never a
// worker fault: it is retried with backoff until it succeeds or ctx ends.
func (s *Service) syncEndpoints(ctx context.Context) error {
	return s.untilRead(ctx, "endpoints view", s.store.Sync)
}

// syncTimeout bounds one sync of the endpoints view.
const syncTimeout = 10 * time.Second

// attempt makes one signed attempt of d to ep and returns the records
// that follow from its outcome. p is the endpoint's probe turn when
// outage mode let d through as its one probe (nil otherwise): attempt
// notes the probe's outcome on it; its caller ends it.
func (s *Service) attempt(ctx context.Context, r *kgo.Record, d *hooklinev1.Delivery, ep *hooklinev1.EndpointRecord, p *health.ProbeTurn) []*kgo.Record {
	attrs := annotate(ctx, d)
	// A delivery held by reference gets its payload back first: what
	// follows sees it as it will be sent.
	if err := s.holds.readHeld(ctx, d); err != nil {
		if ctx.Err() != nil {
			setOutcome(ctx, "interrupted")
			return []*kgo.Record{requeue(r, s.topics.Deliveries)}
		}
		return s.holds.unreadHeld(ctx, r, d, err)
	}
	id := ep.GetEndpoint().GetId()
	now := s.now()
	if s.beforeAttempt != nil {
		s.beforeAttempt(d) // where a bug in signing would panic
	}
	signer, err := s.signers.get(ep, now)
	if errors.Is(err, keyring.ErrUnknownKey) || errors.Is(err, keyring.ErrNotOpened) {
		return s.holds.holdUnsigned(ctx, r, d, id, err)
	}
	if err != nil {
		panic(fmt.Sprintf("endpoint %s has no usable secret: %v", id, err))
	}
	// A record fetched again after its settlement was lost (answered.go)
	// settles from the 2xx its receiver already gave.
	key, url := answerKeyOf(r, d), ep.GetEndpoint().GetUrl()
	ar, reused := s.answered.get(key, url)
	if d.GetFirstAttemptAt() == nil {
		first := now
		if reused {
			first = ar.Started
		}
		d.FirstAttemptAt = timestamppb.New(first)
		d.GiveUpAt = timestamppb.New(first.Add(s.rules().Age(ep)))
	}
	if reused {
		s.metrics.reuse(ctx)
		s.log.DebugContext(ctx, "answered before; settled from that answer", "delivery_id", d.GetDeliveryId(), "attempt", d.GetAttempt(), "answered_at", ar.Started)
	} else {
		timeout := s.cfg.AttemptTimeout
		if t := ep.GetEndpoint().GetTimeout(); t != nil && t.AsDuration() > 0 {
			timeout = t.AsDuration()
		}
		s.metrics.flight(ctx, id, 1)
		var err error
		ar, err = s.client.Do(ctx, transformed(attempt.Request{
			URL:        url,
			Tenant:     ep.GetEndpoint().GetTenantId(),
			EventID:    d.GetEventId(),
			EventType:  d.GetEventType(),
			Payload:    d.GetPayload(),
			Signer:     signer,
			Timeout:    timeout,
			Header:     http.Header{},
			Attributes: attrs,
		}, d.GetTransformed()))
		s.metrics.flight(ctx, id, -1)
		if err != nil {
			// Shut down (or revoked) before the receiver answered: a
			// worker fault, the delivery goes back as it came.
			setOutcome(ctx, "interrupted")
			return []*kgo.Record{requeue(r, s.topics.Deliveries)}
		}
		s.metrics.attempt(ctx, ar.Class, ar.Latency)
		if ar.Class == hooklinev1.OutcomeClass_OUTCOME_CLASS_SUCCESS {
			s.answered.put(key, url, ar)
		}
	}
	s.rcv.Home(id, r.Partition)
	out := s.outcome(ctx, d, ep, ar)
	if p != nil {
		policy := backoff.FromProto(ep.GetEndpoint().GetRetryPolicy(), backoff.Default)
		p.Attempted(ar.Started.Add(ar.Latency), func(n int) time.Duration {
			return min(policy.Delay(uint32(n), s.rand), s.cfg.OutageProbeMax)
		})
	}
	return out
}

// annotate names the delivery on the process span and returns the
// attributes, built only for a recorded span: off costs nothing.
func annotate(ctx context.Context, d *hooklinev1.Delivery) []attribute.KeyValue {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return nil
	}
	attrs := deliveryAttributes(d)
	span.SetAttributes(attrs...)
	return attrs
}

// faulted returns what follows a worker fault (a panic) while handling
// r: the record back unchanged (workerFault), or, once r has faulted
// MaxFaults times and decodes, its end: a FAILED result naming the fault
// and a DeadLetter, like any failed delivery (so it has a terminal
// outcome, and a resend or a recover can send it again).
func (s *Service) faulted(ctx context.Context, r *kgo.Record, why string) []*kgo.Record {
	if faultsOf(r)+1 >= s.cfg.MaxFaults {
		if d, err := decodeDelivery(r); err == nil {
			// A delivery held by reference is dead-lettered with its
			// payload when it can be read back (else naming where it is).
			if err := s.holds.readHeld(ctx, d); err != nil {
				s.log.WarnContext(ctx, "held delivery's payload not read back; dead-lettered without it", "delivery_id", d.GetDeliveryId(), "err", err)
			}
			res := s.writer.result(d, s.now())
			res.Attempt = d.GetAttempt() // the attempt it could not make
			res.State = hooklinev1.DeliveryState_DELIVERY_STATE_FAILED
			res.Reason = fmt.Sprintf("set aside after %d worker faults (not attempts): %s", s.cfg.MaxFaults, why)
			s.log.ErrorContext(ctx, "worker fault limit reached: delivery dead-lettered", "delivery_id", d.GetDeliveryId(),
				"endpoint_id", d.GetEndpointId(), "partition", r.Partition, "offset", r.Offset, "fault", why)
			return s.writer.deadLetter(ctx, d, res)
		}
	}
	return []*kgo.Record{s.workerFault(ctx, r, why)}
}

// faultsOf returns the worker faults r has caused so far.
func faultsOf(r *kgo.Record) int {
	for _, h := range r.Headers {
		if h.Key == headerFaults {
			// The header comes from Kafka, not only from this code: a
			// negative or huge count would never reach MaxFaults (or
			// overflow past it) and loop the record for ever.
			n, err := strconv.Atoi(string(h.Value))
			if err != nil || n < 0 {
				return 0
			}
			return min(n, math.MaxInt32)
		}
	}
	return 0
}

// workerFault returns the record that puts r back unchanged, counting the
// fault in a header, or sets it aside raw once it has faulted MaxFaults
// times (a record that does not decode: see faulted for one that does).
func (s *Service) workerFault(ctx context.Context, r *kgo.Record, why string) *kgo.Record {
	faults := faultsOf(r) + 1
	var headers []kgo.RecordHeader
	for _, h := range r.Headers {
		if h.Key != headerFaults {
			headers = append(headers, h)
		}
	}
	log := s.log.With("partition", r.Partition, "offset", r.Offset, "fault", why, "faults", faults)
	if faults >= s.cfg.MaxFaults {
		log.ErrorContext(ctx, "worker fault limit reached: delivery set aside on the dead-letter topic")
		dead := requeue(r, s.topics.Dead)
		dead.Headers = append(headers, kgo.RecordHeader{Key: headerPoison, Value: []byte("worker fault: " + why)})
		return dead
	}
	log.ErrorContext(ctx, "worker fault: delivery returned unchanged")
	back := requeue(r, s.topics.Deliveries)
	back.Headers = append(headers, kgo.RecordHeader{Key: headerFaults, Value: []byte(strconv.Itoa(faults))})
	return back
}

// requeue returns r for topic, unchanged but for its put-back mark.
func requeue(r *kgo.Record, topic string) *kgo.Record {
	headers := make([]kgo.RecordHeader, 0, len(r.Headers)+1)
	for _, h := range r.Headers {
		if h.Key != headerPutBack {
			headers = append(headers, h)
		}
	}
	mark := strconv.Itoa(int(r.Partition)) + "/" + strconv.FormatInt(r.Offset, 10)
	return &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Headers: append(headers, kgo.RecordHeader{Key: headerPutBack, Value: []byte(mark)})}
}
