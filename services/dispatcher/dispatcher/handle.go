package dispatcher

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/backoff"
	"github.com/hookline/hookline/platform/classify"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/sign"
	"github.com/hookline/hookline/services/dispatcher/attempt"
	"github.com/hookline/hookline/services/dispatcher/retryafter"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Record headers the dispatcher sets.
const (
	// headerPoison marks a record copied raw to the dead-letter topic
	// because it cannot be handled; its value says why. Such a record is
	// the raw input, not a DeadLetter message.
	headerPoison = "hookline-poison"
	// headerFaults counts the worker faults a delivery record has caused.
	headerFaults = "hookline-worker-faults"
)

// handleSafely runs handle and turns a panic into a worker fault
// (R-CLASS-3): the delivery goes back to the deliveries topic exactly as it
// came, with no attempt counted and no due time pushed. A record that keeps
// faulting (MaxFaults times) is set aside raw on the dead-letter topic
// rather than loop forever.
func (s *Service) handleSafely(ctx context.Context, r *kgo.Record) (out []*kgo.Record) {
	defer func() {
		if p := recover(); p != nil {
			out = []*kgo.Record{s.workerFault(r, fmt.Sprint(p))}
		}
	}()
	return s.handle(ctx, r)
}

// workerFault returns the record that puts r back unchanged, counting the
// fault in a header, or sets it aside once it has faulted MaxFaults times.
func (s *Service) workerFault(r *kgo.Record, why string) *kgo.Record {
	faults := 1
	var headers []kgo.RecordHeader
	for _, h := range r.Headers {
		if h.Key == headerFaults {
			n, _ := strconv.Atoi(string(h.Value))
			faults = n + 1
			continue
		}
		headers = append(headers, h)
	}
	log := s.log.With("partition", r.Partition, "offset", r.Offset, "fault", why, "faults", faults)
	if faults >= s.cfg.MaxFaults {
		log.Error("worker fault limit reached: delivery set aside on the dead-letter topic")
		dead := requeue(r, s.topics.Dead)
		dead.Headers = append(headers, kgo.RecordHeader{Key: headerPoison, Value: []byte("worker fault: " + why)})
		return dead
	}
	log.Error("worker fault: delivery returned unchanged")
	back := requeue(r, s.topics.Deliveries)
	back.Headers = append(headers, kgo.RecordHeader{Key: headerFaults, Value: []byte(strconv.Itoa(faults))})
	return back
}

func requeue(r *kgo.Record, topic string) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Headers: r.Headers}
}

// handle decides one delivery record's fate and returns the records to
// write for it.
func (s *Service) handle(ctx context.Context, r *kgo.Record) []*kgo.Record {
	var d hooklinev1.Delivery
	if err := hkafka.Decode(r, &d); err != nil || d.GetDeliveryId() == "" {
		reason := "not a Delivery"
		if err != nil {
			reason = err.Error()
		}
		return []*kgo.Record{s.workerFault(r, reason)}
	}
	now := s.now()
	if due := d.GetDueAt(); due != nil && due.AsTime().After(now) {
		// Never fire early: a delivery not yet due waits on the retries
		// topic, untouched.
		return s.records(s.topics.Retries, d.GetEndpointId(), &d)
	}

	ep := s.store.Get(d.GetEndpointId())
	if ep == nil {
		// Unknown here: maybe created a moment ago and not read yet.
		if err := s.store.Sync(ctx); err != nil {
			panic(fmt.Sprintf("endpoints view cannot sync: %v", err)) // worker fault: returned unchanged
		}
		ep = s.store.Get(d.GetEndpointId())
	}
	if ep == nil {
		res := s.result(&d, now)
		res.State = hooklinev1.DeliveryState_DELIVERY_STATE_ENDPOINT_DELETED
		res.Reason = "endpoint deleted"
		return s.records(s.topics.Results, d.GetEndpointId(), res)
	}
	if ep.GetEndpoint().GetStatus() == hooklinev1.EndpointStatus_ENDPOINT_STATUS_PAUSED {
		res := s.result(&d, now)
		res.State = hooklinev1.DeliveryState_DELIVERY_STATE_PARKED
		res.Reason = "endpoint paused"
		return append(s.records(s.topics.Parked, d.GetEndpointId(), &d), s.records(s.topics.Results, d.GetEndpointId(), res)...)
	}

	signer, err := sign.NewSigner(activeSecrets(ep, now)...)
	if err != nil {
		panic(fmt.Sprintf("endpoint %s has no usable secret: %v", ep.GetEndpoint().GetId(), err))
	}
	if d.GetFirstAttemptAt() == nil {
		d.FirstAttemptAt = timestamppb.New(now)
		d.GiveUpAt = timestamppb.New(now.Add(s.maxAge(ep)))
	}
	timeout := s.cfg.AttemptTimeout
	if t := ep.GetEndpoint().GetTimeout(); t != nil && t.AsDuration() > 0 {
		timeout = t.AsDuration()
	}
	ar, err := s.client.Do(ctx, attempt.Request{
		URL:       ep.GetEndpoint().GetUrl(),
		EventID:   d.GetEventId(),
		EventType: d.GetEventType(),
		Payload:   d.GetPayload(),
		Signer:    signer,
		Timeout:   timeout,
		Header:    http.Header{},
	})
	if err != nil {
		// Shut down before the receiver answered: a worker fault.
		return []*kgo.Record{requeue(r, s.topics.Deliveries)}
	}
	return s.outcome(&d, ep, ar)
}

// outcome turns an attempt's result into the records that follow it.
func (s *Service) outcome(d *hooklinev1.Delivery, ep *hooklinev1.EndpointRecord, ar attempt.Result) []*kgo.Record {
	res := s.result(d, ar.Started)
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
	log := s.log.With("delivery_id", d.GetDeliveryId(), "event_id", d.GetEventId(), "endpoint_id", key, "attempt", d.GetAttempt(), "status", ar.StatusCode, "class", ar.Class.String())

	switch {
	case ar.Class == hooklinev1.OutcomeClass_OUTCOME_CLASS_SUCCESS:
		res.State = hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED
		return s.records(s.topics.Results, key, res)
	case !classify.Retryable(ar.Class):
		res.State = hooklinev1.DeliveryState_DELIVERY_STATE_FAILED
		res.Reason = "permanent failure"
		log.Info("delivery failed permanently; dead-lettered", "err", res.Error)
		return s.deadLetter(d, res)
	case d.GetKind() == hooklinev1.DeliveryKind_DELIVERY_KIND_RESEND, d.GetKind() == hooklinev1.DeliveryKind_DELIVERY_KIND_TEST:
		// A manual resend or a test event is exactly one attempt (R-REPLAY-1): never retried.
		res.State, res.Reason = hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, "one-off attempt failed; resends and test events are not retried"
		return s.deadLetter(d, res)
	}

	policy := backoff.FromProto(ep.GetEndpoint().GetRetryPolicy(), backoff.Default)
	maxAttempts := s.maxAttempts(ep)
	if d.GetAttempt() >= maxAttempts {
		res.State = hooklinev1.DeliveryState_DELIVERY_STATE_FAILED
		res.Reason = fmt.Sprintf("gave up after %d attempts", d.GetAttempt())
		log.Info("delivery out of attempts; dead-lettered")
		return s.deadLetter(d, res)
	}
	wait := policy.Delay(d.GetAttempt(), s.rand)
	if retryafter.Honoured(ar.StatusCode) {
		// The later of the receiver's ask and our backoff wins; an
		// unparsable ask is ignored, a huge one capped.
		if ra, ok := retryafter.Parse(ar.RetryAfter, ar.Started.Add(ar.Latency), s.cfg.RetryAfterMax); ok && ra > wait {
			wait = ra
		}
	}
	next := ar.Started.Add(ar.Latency).Add(wait)
	if giveUp := d.GetGiveUpAt(); giveUp != nil && next.After(giveUp.AsTime()) {
		res.State = hooklinev1.DeliveryState_DELIVERY_STATE_EXPIRED
		res.Reason = fmt.Sprintf("next attempt would be after the give-up time %s", giveUp.AsTime().UTC().Format(time.RFC3339))
		log.Info("delivery out of time; dead-lettered")
		return s.deadLetter(d, res)
	}
	res.State = hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED
	res.NextAttemptAt = timestamppb.New(next)
	retry := proto.Clone(d).(*hooklinev1.Delivery)
	retry.Attempt++
	retry.DueAt = res.NextAttemptAt
	retry.Kind = hooklinev1.DeliveryKind_DELIVERY_KIND_RETRY
	s.retries.Add(context.Background(), 1, metric.WithAttributes(attribute.Int("hookline.attempt", int(d.GetAttempt()))))
	log.LogAttrs(context.Background(), slog.LevelInfo, "retry scheduled", slog.Time("next_attempt_at", next), slog.String("err", res.Error))
	return append(s.records(s.topics.Results, key, res), s.records(s.topics.Retries, key, retry)...)
}

func (s *Service) deadLetter(d *hooklinev1.Delivery, res *hooklinev1.AttemptResult) []*kgo.Record {
	key := d.GetEndpointId()
	dl := &hooklinev1.DeadLetter{Delivery: d, LastResult: res, DeadAt: timestamppb.New(s.now())}
	return append(s.records(s.topics.Results, key, res), s.records(s.topics.Dead, key, dl)...)
}

func (s *Service) result(d *hooklinev1.Delivery, at time.Time) *hooklinev1.AttemptResult {
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
func (s *Service) records(topic, key string, m proto.Message) []*kgo.Record {
	r, err := hkafka.Record(topic, key, m)
	if err != nil {
		panic(err)
	}
	return []*kgo.Record{r}
}

func (s *Service) maxAttempts(ep *hooklinev1.EndpointRecord) uint32 {
	if n := ep.GetEndpoint().GetRetryPolicy().GetMaxAttempts(); n > 0 {
		return n
	}
	return s.cfg.MaxAttempts
}

func (s *Service) maxAge(ep *hooklinev1.EndpointRecord) time.Duration {
	if d := ep.GetEndpoint().GetRetryPolicy().GetMaxAge(); d != nil && d.AsDuration() > 0 {
		return d.AsDuration()
	}
	return s.cfg.MaxAge
}

// activeSecrets returns the endpoint's secrets that still sign at now:
// the current one and any rotated-out one inside its grace period.
func activeSecrets(ep *hooklinev1.EndpointRecord, now time.Time) []string {
	out := make([]string, 0, len(ep.GetSecrets()))
	for _, sec := range ep.GetSecrets() {
		if exp := sec.GetExpiresAt(); exp != nil && !exp.AsTime().After(now) {
			continue
		}
		out = append(out, sec.GetSecret())
	}
	return out
}
