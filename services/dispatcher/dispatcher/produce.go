package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
)

// A commit writes every output of the window's completed prefix in one
// transaction; one record Kafka will never take aborts it, and the
// records above the committed offsets are consumed and attempted again.
// Were nothing else done, a record that can never be written would abort
// every commit, each after re-attempting the whole window. So:
//
//   - before a record is handed to the producer, its size is checked: a
//     delivery whose outputs include a record over recordLimit (a retry,
//     deferral or dead letter carrying a payload near the largest
//     allowed) is dead-lettered FAILED without its payload instead, with
//     the attempt's result and a reason (setAside);
//   - when a broker refuses a record for what it is (too large for the
//     topic's max.message.bytes, invalid), that delivery is marked, and
//     when its record comes again after the abort it is set aside the
//     same way, with no second attempt;
//   - every aborted commit backs off before the window is consumed again,
//     exponentially from abortBackoffMin to abortBackoffMax, and is
//     counted (hookline.dispatcher.commit.aborts, by reason); refusals
//     that no record can fix (authorization, a missing or invalid topic)
//     are logged at error level on every abort: the dispatcher then makes
//     no progress, retrying at most every abortBackoffMax, until an
//     operator fixes the cause.

// recordLimit is the largest record (key, value and headers) the
// dispatcher hands to its producer: kgo refuses a record whose batch
// would exceed ProducerBatchMaxBytes (hkafka.MaxRecordBytes), and a batch
// adds its own overhead.
const recordLimit = hkafka.MaxRecordBytes - 16<<10

// bigRecord is the smallest record taken to be the cause when a broker
// refuses a batch of several records as too large: a batch of small
// records over the limit means the topic's max.message.bytes is below
// Hookline's batches, which no single delivery can fix.
const bigRecord = 64 << 10

const (
	abortBackoffMin = 100 * time.Millisecond
	abortBackoffMax = 30 * time.Second
	// transientBackoffMax caps the backoff after aborts Kafka itself
	// caused (a broker restarting, a leader moving): they end by
	// themselves, and a long wait would only delay the recovery (make
	// chaos: a 30 s backoff after a broker restart held deliveries past
	// the crash test's settle bound).
	transientBackoffMax = 2 * time.Second
	// unwritableMemory is how long a delivery marked unwritable stays
	// marked: its record comes again right after the abort.
	unwritableMemory = 10 * time.Minute
)

// errBackoffEnded, as a commit message's produce error, ends the pause
// after an aborted commit (commit.go).
var errBackoffEnded = errors.New("commit backoff ended")

func recordBytes(r *kgo.Record) int {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// unwritables are deliveries whose outputs a broker refused for what they
// are, by delivery id. Safe for concurrent use.
type unwritables struct {
	n  atomic.Int32 // len(m), read without the lock on the hot path
	mu sync.Mutex
	m  map[string]unwritable
}

type unwritable struct {
	why string
	at  time.Time
}

func (u *unwritables) mark(id, why string, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = map[string]unwritable{}
	}
	for k, v := range u.m {
		if now.Sub(v.at) > unwritableMemory {
			delete(u.m, k)
		}
	}
	u.m[id] = unwritable{why: why, at: now}
	u.n.Store(int32(len(u.m)))
}

func (u *unwritables) reason(id string) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.m[id].why
}

// unwritableReason says why r's delivery was marked unwritable, or "".
func (s *Service) unwritableReason(r *kgo.Record) (*hooklinev1.Delivery, string) {
	if s.unwritable.n.Load() == 0 {
		return nil, ""
	}
	d, err := decodeDelivery(r)
	if err != nil {
		return nil, ""
	}
	return d, s.unwritable.reason(d.GetDeliveryId())
}

// fit returns outs, or, when one of them is over recordLimit, what
// setAside makes of r's delivery instead.
func (s *Service) fit(ctx context.Context, r *kgo.Record, outs []*kgo.Record) []*kgo.Record {
	why := ""
	for _, o := range outs {
		if n := recordBytes(o); n > recordLimit {
			why = fmt.Sprintf("a record of %d bytes for %s is over the %d-byte limit", n, o.Topic, recordLimit)
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
	return s.setAside(ctx, d, outs, why)
}

// setAside ends d FAILED because a record it needs can never be written:
// a result (the attempt's, if outs hold one) and a DeadLetter without the
// payload (ingest's index keeps the payload from the deliveries topic,
// so it can still be resent or recovered), plus the outputs that are
// not the delivery's (notices, an automatic pause).
func (s *Service) setAside(ctx context.Context, d *hooklinev1.Delivery, outs []*kgo.Record, why string) []*kgo.Record {
	var keep []*kgo.Record
	var res *hooklinev1.AttemptResult
	for _, o := range outs {
		switch o.Topic {
		case s.topics.Notices, s.topics.Endpoints:
			keep = append(keep, o)
		case s.topics.Results:
			ar := new(hooklinev1.AttemptResult)
			if proto.Unmarshal(o.Value, ar) == nil {
				res = ar
			}
		}
	}
	if res == nil {
		res = s.result(d, s.now())
		res.Attempt = d.GetAttempt()
	}
	res.State = hooklinev1.DeliveryState_DELIVERY_STATE_FAILED
	res.NextAttemptAt = nil
	res.Reason = "its records cannot be written to Kafka (" + why + "); dead-lettered without its payload"
	small := proto.Clone(d).(*hooklinev1.Delivery)
	small.Payload = nil
	s.log.ErrorContext(ctx, "delivery cannot be written to Kafka; dead-lettered without its payload",
		"delivery_id", d.GetDeliveryId(), "endpoint_id", d.GetEndpointId(), "attempt", d.GetAttempt(), "why", why)
	setOutcome(ctx, "unwritable")
	return append(s.deadLetter(ctx, small, res), keep...)
}

// refused is a record a broker did not take, and why.
type refused struct {
	r   *kgo.Record
	err error
}

// recordFault reports whether err says a record can never be written as
// it is (rather than that Kafka is unavailable or refuses every write).
func recordFault(err error) bool {
	return errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge) || errors.Is(err, kerr.InvalidRecord)
}

// refusal reports whether err is a refusal no retry can fix: writes
// Kafka will not take until an operator changes something.
func refusal(err error) bool {
	return recordFault(err) ||
		errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || errors.Is(err, kerr.InvalidTopicException) ||
		errors.Is(err, kerr.PolicyViolation) || errors.Is(err, kerr.UnsupportedForMessageFormat)
}

// classifyAbort marks the deliveries whose records a broker refused for
// what they are, and names the abort's reason: "unwritable" (some were
// marked; they are set aside when they come again), "refused" (a refusal
// no delivery can fix) or "transient".
//
// A broker refuses a whole batch, so every record of a partition's batch
// carries the error: in a partition with one refused record that record
// is marked; with several, only the largest, and only if it is big
// enough to be the cause (bigRecord) — a batch of small records refused
// as too large is the topic's configuration, not a delivery.
func (s *Service) classifyAbort(failed []refused, now time.Time) string {
	byPart := map[tp][]refused{}
	reason := "transient"
	for _, f := range failed {
		if refusal(f.err) {
			reason = "refused"
		}
		if recordFault(f.err) {
			k := tp{f.r.Topic, f.r.Partition}
			byPart[k] = append(byPart[k], f)
		}
	}
	for _, fs := range byPart {
		sort.Slice(fs, func(i, j int) bool { return recordBytes(fs[i].r) > recordBytes(fs[j].r) })
		if len(fs) > 1 && recordBytes(fs[0].r) < bigRecord {
			continue
		}
		if id := s.deliveryOf(fs[0].r); id != "" {
			s.unwritable.mark(id, fmt.Sprintf("%s refused a record of %d bytes: %v", fs[0].r.Topic, recordBytes(fs[0].r), fs[0].err), now)
			reason = "unwritable"
		}
	}
	return reason
}

// deliveryOf returns the id of the delivery an output record is about.
func (s *Service) deliveryOf(r *kgo.Record) string {
	switch r.Topic {
	case s.topics.Retries, s.topics.Deliveries:
		if d, err := decodeDelivery(r); err == nil {
			return d.GetDeliveryId()
		}
	case s.topics.Dead:
		var dl hooklinev1.DeadLetter
		if hkafka.Decode(r, &dl) == nil && dl.GetDelivery().GetDeliveryId() != "" {
			return dl.GetDelivery().GetDeliveryId()
		}
		if d, err := decodeDelivery(r); err == nil { // a raw copy
			return d.GetDeliveryId()
		}
	case s.topics.Results:
		var ar hooklinev1.AttemptResult
		if hkafka.Decode(r, &ar) == nil {
			return ar.GetDeliveryId()
		}
	}
	return ""
}

// abortBackoff is the pause after the n-th aborted commit in a row.
func abortBackoff(n int, reason string) time.Duration {
	limit := abortBackoffMax
	if reason == "transient" {
		limit = transientBackoffMax
	}
	return min(abortBackoffMin<<min(n-1, 16), limit)
}

// afterTransaction accounts for a transaction's end, on the commit's
// goroutine (one at a time): an abort is classified, counted and logged,
// and the backoff before the window is consumed again returned.
func (s *Service) afterTransaction(committed, aborted bool, failed []refused, records int, produceErr error) time.Duration {
	if committed {
		s.aborts = 0
		return 0
	}
	if !aborted {
		return 0 // the session failed: the loop ends
	}
	reason := s.classifyAbort(failed, s.now())
	s.aborts++
	wait := abortBackoff(s.aborts, reason)
	s.metrics.abort(reason)
	log := s.log.Warn
	if reason != "transient" {
		log = s.log.Error
	}
	log("commit aborted; uncommitted deliveries are consumed again after a backoff", "reason", reason,
		"records", records, "aborts_in_a_row", s.aborts, "backoff", wait, "produce_err", produceErr)
	return wait
}
