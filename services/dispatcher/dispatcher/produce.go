package dispatcher

import (
	"context"
	"errors"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
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

// recordLimit is the largest record the dispatcher hands its producer
// (platform/kafka: every service's records are sized against it).
const recordLimit = hkafka.RecordLimit

// bigRecord: see hkafka.BigRecord.
const bigRecord = hkafka.BigRecord

const (
	abortBackoffMin     = hkafka.AbortBackoffMin
	abortBackoffMax     = hkafka.AbortBackoffMax
	transientBackoffMax = hkafka.TransientBackoffMax
)

// errBackoffEnded, as a commit message's produce error, ends the pause
// after an aborted commit (commit.go).
var errBackoffEnded = errors.New("commit backoff ended")

func recordBytes(r *kgo.Record) int { return hkafka.RecordBytes(r) }

// unwritableReason says why r's delivery was marked unwritable, or "".
func (s *Service) unwritableReason(r *kgo.Record) (*hooklinev1.Delivery, string) {
	if !s.unwritable.Any() {
		return nil, ""
	}
	d, err := decodeDelivery(r)
	if err != nil {
		return nil, ""
	}
	return d, s.unwritable.Reason(d.GetDeliveryId())
}

// fit returns outs, or, when one of them is over recordLimit, what
// setAside makes of r's delivery instead.
func (s *Service) fit(ctx context.Context, r *kgo.Record, outs []*kgo.Record) []*kgo.Record {
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
	if s.setAsideHook != nil {
		s.setAsideHook(d)
	}
	return append(s.deadLetter(ctx, small, res), keep...)
}

// refused is a record a broker did not take, and why.
type refused = hkafka.Refused

// classifyAbort marks the deliveries whose records a broker refused for
// what they are (hkafka.Blame; they are set aside when they come again)
// and names the abort's reason.
func (s *Service) classifyAbort(failed []refused, now time.Time) string {
	reason, _ := s.blameAbort(failed, now)
	return reason
}

// blameAbort is classifyAbort that also returns the deliveries it
// blamed, by id: the commit forgets only their partitions (committed).
func (s *Service) blameAbort(failed []refused, now time.Time) (string, map[string]string) {
	reason, blamed := hkafka.Blame(failed, s.deliveryOf)
	for id, why := range blamed {
		s.unwritable.Mark(id, why, now)
	}
	return reason, blamed
}

// carriesOn reports whether a record to topic carries its delivery on,
// to be attempted later: a retry, a deferral, a requeue, a park.
func (s *Service) carriesOn(topic string) bool {
	return topic == s.topics.Retries || topic == s.topics.Deliveries || topic == s.topics.Parked
}

// deliveryOf returns the id of the delivery an output record is about.
func (s *Service) deliveryOf(r *kgo.Record) string {
	switch r.Topic {
	case s.topics.Retries, s.topics.Deliveries, s.topics.Parked:
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
	case s.topics.Notices:
		var n hooklinev1.Notice
		if hkafka.Decode(r, &n) == nil {
			return n.GetDeliveryId()
		}
	case s.topics.Lanes:
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

// afterTransaction accounts for a transaction's end, on the commit's
// goroutine (one at a time): an abort is classified, counted and logged,
// and the backoff before the window is consumed again returned, with
// the deliveries blamed for it (by id; nil when none was). parts are the
// partitions whose work the transaction carried: only their abort counts
// move (hkafka.Backoff).
func (s *Service) afterTransaction(committed, aborted bool, failed []refused, records int, produceErr error, parts []hkafka.TopicPartition) (time.Duration, map[string]string) {
	if committed {
		s.aborts.Committed(parts)
		return 0, nil
	}
	if !aborted {
		return 0, nil // the session failed: the loop ends
	}
	reason, blamed := s.blameAbort(failed, s.now())
	wait, n := s.aborts.Aborted(parts, reason)
	s.metrics.abort(reason)
	log := s.log.Warn
	if reason != hkafka.AbortTransient {
		log = s.log.Error
	}
	log("commit aborted; its work is committed again after a backoff (a blamed delivery's partition is consumed again)", "reason", reason,
		"records", records, "aborts_in_a_row", n, "backoff", wait, "blamed", len(blamed), "produce_err", produceErr)
	return wait, blamed
}
