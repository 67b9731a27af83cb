package dispatcher

import (
	"errors"
	"time"

	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
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
//     the attempt's result and a reason (setAside, writer.go);
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

// refused is a record a broker did not take, and why.
type refused = hkafka.Refused

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
	reason, blamed := s.writer.blameAbort(failed, s.now())
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
