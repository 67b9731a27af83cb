package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/endpoints"
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

// handler handles one delivery record: it triages it (triage: not due,
// endpoint unknown, deleted, of another tenant, paused, its
// transformation ended) and settles what triage did not send to a lane
// (settle), keeps outage mode's gate (gate), and runs every record's
// handling inside its process span, a panic turned into a worker fault
// (process, faulted, workerFault); the attempt and what follows it are
// the attempter's. It holds only what that takes, handed over by New
// once the options are applied: the Service's config by pointer
// (--accept-unsigned-deliveries, --outage-recheck, --early-hold,
// --max-worker-faults and the group are read as they are used: tests
// change them on s.cfg after New), the endpoints view, the secrets keys
// records are authenticated with, endpoint health, the holds, the
// writer, the transformations' failing streaks, the topics, the logger,
// the clock, the jitter of the endpoints view's sync, the tracer and the
// attempter. The engine places records and asks it for their handling.
type handler struct {
	cfg       *Config
	store     *endpoints.Store
	keys      *keyring.Keyring
	rcv       *health.Receivers
	holds     *holds
	writer    *recordWriter
	streaks   *transformStreaks
	attempter *attempter
	topics    hkafka.Topics
	log       *slog.Logger
	now       func() time.Time
	rand      *lockedRand
	tracer    trace.Tracer
	// processSpan names the span of handling a delivery record.
	processSpan string
	// earlyWarned is when a delivery read too early was last warned of
	// (early.go).
	earlyWarned earlyWarned
}

// triage decides what becomes of d before it waits in its endpoint's
// lane. synced says the endpoints view was synced for it already, so an
// endpoint still unknown is deleted.
func (h *handler) triage(d *hooklinev1.Delivery, now time.Time, synced bool) (verdict, *hooklinev1.EndpointRecord) {
	if due := d.GetDueAt(); due != nil && due.AsTime().After(now) {
		// Never fire early: a delivery not yet due waits, in memory when
		// it is due within the early hold, else on the retries topic
		// (early.go).
		return notDue, nil
	}
	ep := h.store.Get(d.GetEndpointId())
	switch {
	case ep == nil && !synced:
		// Unknown here: maybe created a moment ago and not read yet.
		return needSync, nil
	case ep == nil:
		return epDeleted, nil
	case ep.GetEndpoint().GetTenantId() != d.GetTenantId(), !h.authentic(d):
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
func (h *handler) settle(ctx context.Context, v verdict, r *kgo.Record, d *hooklinev1.Delivery, ep *hooklinev1.EndpointRecord, now time.Time) []*kgo.Record {
	if d != nil {
		annotate(ctx, d)
	}
	switch v {
	case notDue:
		setOutcome(ctx, "not_due")
		return h.notYetDue(ctx, r, d, now)
	case epDeleted:
		res := h.writer.result(d, now)
		res.State = hooklinev1.DeliveryState_DELIVERY_STATE_ENDPOINT_DELETED
		res.Reason = "endpoint deleted"
		h.writer.finished(ctx, res.State)
		setOutcome(ctx, outcomeLabel(res.State))
		return h.writer.resultRecords(ctx, d, res)
	case epForeign:
		res := h.writer.result(d, now)
		res.State = hooklinev1.DeliveryState_DELIVERY_STATE_FAILED
		res.Reason = h.refusedReason(d)
		h.log.ErrorContext(ctx, "delivery refused; dead-lettered", "reason", res.Reason, "delivery_id", d.GetDeliveryId(), "endpoint_id", d.GetEndpointId())
		setOutcome(ctx, "foreign_endpoint")
		return h.writer.deadLetter(ctx, d, res)
	case epPaused:
		return h.holds.park(ctx, r, d, now)
	case transformEnded:
		return h.endTransformed(ctx, d, ep, now)
	}
	return []*kgo.Record{h.workerFault(ctx, r, "not a Delivery")}
}

// gate is outage mode's decision for d when its lane may start it. An
// operator's resend or test event is attempted now, outage or not.
func (h *handler) gate(d *hooklinev1.Delivery, ep *hooklinev1.EndpointRecord, now time.Time) (health.Gate, time.Time) {
	oneOff := d.GetKind() == hooklinev1.DeliveryKind_DELIVERY_KIND_RESEND || d.GetKind() == hooklinev1.DeliveryKind_DELIVERY_KIND_TEST
	if ep.GetEndpoint().GetOutageModeDisabled() || oneOff {
		return health.Pass, time.Time{}
	}
	preferred := d.GetAttempt() == 1 || isOrdered(ep, d)
	return h.rcv.OutageGate(ep.GetEndpoint().GetId(), now, preferred, h.cfg.OutageRecheck)
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
func (h *handler) process(ctx context.Context, r *kgo.Record, fn func(context.Context) []*kgo.Record) (out []*kgo.Record) {
	ctx, span := h.startProcess(ctx, r)
	defer func() {
		if p := recover(); p != nil {
			out = h.faulted(ctx, r, fmt.Sprint(p))
			setOutcome(ctx, "worker_fault")
			span.SetStatus(codes.Error, fmt.Sprint(p))
		}
		h.writer.stampTrace(r, out)
		span.End()
	}()
	if d, why := h.writer.unwritableReason(r); why != "" {
		return h.writer.setAside(ctx, d, nil, why)
	}
	return h.writer.fit(ctx, r, fn(ctx))
}

// handleSafely is one record's whole handling outside the loop: triage,
// gate and attempt, with no lane (so no cap or rate). Tests and
// benchmarks use it; the loop runs the same steps with lanes between.
func (h *handler) handleSafely(ctx context.Context, r *kgo.Record) []*kgo.Record {
	return h.process(ctx, r, func(ctx context.Context) []*kgo.Record { return h.handle(ctx, r) })
}

func (h *handler) handle(ctx context.Context, r *kgo.Record) []*kgo.Record {
	d, err := decodeDelivery(r)
	if err != nil {
		return []*kgo.Record{h.workerFault(ctx, r, err.Error())}
	}
	if isLaneCommand(d) {
		return nil // only the loop's laneCommands applies one (lanecmd.go)
	}
	now := h.now()
	v, ep := h.triage(d, now, false)
	if v == needSync {
		if err := h.syncEndpoints(ctx); err != nil {
			return []*kgo.Record{requeue(r, h.topics.Deliveries)}
		}
		v, ep = h.triage(d, now, true)
	}
	if v != toLane {
		return h.settle(ctx, v, r, d, ep, now)
	}
	g, until := h.gate(d, ep, now)
	if g == health.Hold {
		return h.holds.hold(ctx, r, d, until)
	}
	var p *health.ProbeTurn
	if g == health.Probe {
		p = h.rcv.Turn(ep.GetEndpoint().GetId())
		defer func() { p.Over(h.now()) }() // however the handling ends
	}
	return h.attempter.attempt(ctx, r, d, ep, p)
}

// attemptRecord is the handling of r by one attempt of d to ep, as the
// loop runs it once d's lane started it (process: spans, panics,
// records that cannot be written). probe says outage mode let d through
// as ep's one probe: the probe's end is recorded here, around process,
// so that every way out of it — set aside before the attempt, held for
// an unusable secret, a panic, interrupted, an outcome — ends the probe
// (DESIGN.md: every probe ends).
func (h *handler) attemptRecord(ctx context.Context, r *kgo.Record, d *hooklinev1.Delivery, ep *hooklinev1.EndpointRecord, probe bool) []*kgo.Record {
	var p *health.ProbeTurn
	if probe {
		p = h.rcv.Turn(ep.GetEndpoint().GetId())
		defer func() { p.Over(h.now()) }()
	}
	return h.process(ctx, r, func(ctx context.Context) []*kgo.Record { return h.attempter.attempt(ctx, r, d, ep, p) })
}

// syncEndpoints waits until the endpoints view holds every endpoint
// written before the call. A failure is an infrastructure error, never a
// worker fault: it is retried with backoff until it succeeds or ctx ends.
func (h *handler) syncEndpoints(ctx context.Context) error {
	return hkafka.Until(ctx, h.log, h.rand, "endpoints view", syncTimeout, h.store.Sync)
}

// syncTimeout bounds one sync of the endpoints view.
const syncTimeout = 10 * time.Second

// attempter makes one attempt of a delivery its lane started and turns
// its result into the records that follow (outcome.go): the decision
// (decide), the endpoint's health and the notices and automatic pause it
// calls for, a retry, a dead letter, or its ordered lane's block
// (block.go). It holds only what that takes, handed over by New once the
// options are applied: the Service's config by pointer (the budgets,
// the health thresholds, --attempt-timeout and --outage-probe-max are
// read as they are used: tests change them on s.cfg after New), the
// HTTP attempt client, the signers, the answers kept (answered.go),
// endpoint health, the holds (a payload read back, an unusable secret),
// the writer, the transformations' failing streaks, the topics, the
// metrics, the logger, the clock, the jitter, trackPause (the pending
// automatic pauses, settled after the commit: autopause.go) and
// beforeAttempt (WithBeforeAttempt). The handler asks it for an attempt.
type attempter struct {
	cfg      *Config
	client   *attempt.Client
	signers  *signers
	creds    *credentials
	answered *answered
	rcv      *health.Receivers
	holds    *holds
	writer   *recordWriter
	streaks  *transformStreaks
	topics   hkafka.Topics
	metrics  instruments
	log      *slog.Logger
	now      func() time.Time
	rand     *lockedRand
	// trackPause registers an automatic pause for settling after its
	// commit (pendingPauses.track).
	trackPause func(id string, r *kgo.Record)
	// beforeAttempt, if set, is called as each attempt begins (tests;
	// WithBeforeAttempt).
	beforeAttempt func(*hooklinev1.Delivery)
}

// attempt makes one signed attempt of d to ep and returns the records
// that follow from its outcome. p is the endpoint's probe turn when
// outage mode let d through as its one probe (nil otherwise): attempt
// notes the probe's outcome on it; its caller ends it.
func (a *attempter) attempt(ctx context.Context, r *kgo.Record, d *hooklinev1.Delivery, ep *hooklinev1.EndpointRecord, p *health.ProbeTurn) []*kgo.Record {
	attrs := annotate(ctx, d)
	// A delivery held by reference gets its payload back first: what
	// follows sees it as it will be sent.
	if err := a.holds.readHeld(ctx, d); err != nil {
		if ctx.Err() != nil {
			setOutcome(ctx, "interrupted")
			return []*kgo.Record{requeue(r, a.topics.Deliveries)}
		}
		return a.holds.unreadHeld(ctx, r, d, err)
	}
	id := ep.GetEndpoint().GetId()
	now := a.now()
	if a.beforeAttempt != nil {
		a.beforeAttempt(d) // where a bug in signing would panic
	}
	signer, err := a.signers.get(ep, now)
	if errors.Is(err, keyring.ErrUnknownKey) || errors.Is(err, keyring.ErrNotOpened) {
		return a.holds.holdUnsigned(ctx, r, d, id, err)
	}
	if err != nil {
		panic(fmt.Sprintf("endpoint %s has no usable secret: %v", id, err))
	}
	creds, err := a.creds.get(ep)
	if err != nil {
		// A credential that does not open: held like an unusable
		// signing secret, until the operator fixes the key file.
		return a.holds.holdUnsigned(ctx, r, d, id, err)
	}
	// A record fetched again after its settlement was lost (answered.go)
	// settles from the 2xx its receiver already gave.
	key, url := answerKeyOf(r, d), ep.GetEndpoint().GetUrl()
	ar, reused := a.answered.get(key, url)
	if d.GetFirstAttemptAt() == nil {
		first := now
		if reused {
			first = ar.Started
		}
		d.FirstAttemptAt = timestamppb.New(first)
		d.GiveUpAt = timestamppb.New(first.Add(a.cfg.rules().Age(ep)))
	}
	if reused {
		a.metrics.reuse(ctx)
		a.log.DebugContext(ctx, "answered before; settled from that answer", "delivery_id", d.GetDeliveryId(), "attempt", d.GetAttempt(), "answered_at", ar.Started)
	} else {
		timeout := a.cfg.AttemptTimeout
		if t := ep.GetEndpoint().GetTimeout(); t != nil && t.AsDuration() > 0 {
			timeout = t.AsDuration()
		}
		a.metrics.flight(ctx, id, 1)
		var err error
		ar, err = a.client.Do(ctx, transformed(attempt.Request{
			URL:         url,
			Tenant:      ep.GetEndpoint().GetTenantId(),
			EventID:     d.GetEventId(),
			EventType:   d.GetEventType(),
			Payload:     d.GetPayload(),
			Signer:      signer,
			Timeout:     timeout,
			Header:      batchHeader(d),
			Credentials: creds,
			Attributes:  attrs,
		}, d.GetTransformed()))
		a.metrics.flight(ctx, id, -1)
		if err != nil {
			// Shut down (or revoked) before the receiver answered: a
			// worker fault, the delivery goes back as it came.
			setOutcome(ctx, "interrupted")
			return []*kgo.Record{requeue(r, a.topics.Deliveries)}
		}
		a.metrics.attempt(ctx, ar.Class, ar.Latency)
		if ar.Class == hooklinev1.OutcomeClass_OUTCOME_CLASS_SUCCESS {
			a.answered.put(key, url, ar)
		}
	}
	a.rcv.Home(id, r.Partition)
	out := a.outcome(ctx, d, ep, ar)
	if at, ok := a.creds.expiring(ep, now); ok {
		out = append(out, a.writer.records(a.topics.Notices, id, certificateExpiring(ep, at, now))...)
	}
	if p != nil {
		policy := backoff.FromProto(ep.GetEndpoint().GetRetryPolicy(), backoff.Default)
		p.Attempted(ar.Started.Add(ar.Latency), func(n int) time.Duration {
			return min(policy.Delay(uint32(n), a.rand), a.cfg.OutageProbeMax)
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
func (h *handler) faulted(ctx context.Context, r *kgo.Record, why string) []*kgo.Record {
	if faultsOf(r)+1 >= h.cfg.MaxFaults {
		if d, err := decodeDelivery(r); err == nil {
			// A delivery held by reference is dead-lettered with its
			// payload when it can be read back (else naming where it is).
			if err := h.holds.readHeld(ctx, d); err != nil {
				h.log.WarnContext(ctx, "held delivery's payload not read back; dead-lettered without it", "delivery_id", d.GetDeliveryId(), "err", err)
			}
			res := h.writer.result(d, h.now())
			res.Attempt = d.GetAttempt() // the attempt it could not make
			res.State = hooklinev1.DeliveryState_DELIVERY_STATE_FAILED
			res.Reason = fmt.Sprintf("set aside after %d worker faults (not attempts): %s", h.cfg.MaxFaults, why)
			h.log.ErrorContext(ctx, "worker fault limit reached: delivery dead-lettered", "delivery_id", d.GetDeliveryId(),
				"endpoint_id", d.GetEndpointId(), "partition", r.Partition, "offset", r.Offset, "fault", why)
			return h.writer.deadLetter(ctx, d, res)
		}
	}
	return []*kgo.Record{h.workerFault(ctx, r, why)}
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
func (h *handler) workerFault(ctx context.Context, r *kgo.Record, why string) *kgo.Record {
	faults := faultsOf(r) + 1
	var headers []kgo.RecordHeader
	for _, h := range r.Headers {
		if h.Key != headerFaults {
			headers = append(headers, h)
		}
	}
	log := h.log.With("partition", r.Partition, "offset", r.Offset, "fault", why, "faults", faults)
	if faults >= h.cfg.MaxFaults {
		log.ErrorContext(ctx, "worker fault limit reached: delivery set aside on the dead-letter topic")
		dead := requeue(r, h.topics.Dead)
		dead.Headers = append(headers, kgo.RecordHeader{Key: headerPoison, Value: []byte("worker fault: " + why)})
		return dead
	}
	log.ErrorContext(ctx, "worker fault: delivery returned unchanged")
	back := requeue(r, h.topics.Deliveries)
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
