package kafka

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// What a transactional service (the dispatcher, the scheduler) does with
// a record Kafka will not take, in one home (docs/DESIGN.md, invariants
// "every produced record is size-checked and blamed" and "every abort
// loop backs off"):
//
//   - every record is sized before the transaction against RecordLimit
//     (RecordBytes); a record over it is blamed on the delivery whose
//     settlement produced it, which ends FAILED and dead-lettered
//     without the oversized record, never handed to the producer;
//   - a record a broker refuses for what it is (RecordFault) aborts the
//     transaction; Blame names the delivery it came from, which the
//     caller sets aside when it comes again;
//   - every aborted transaction backs off (Backoff), per partition: a
//     partition's count is reset only by a commit that carried that
//     partition's work, never by another partition's.

// RecordLimit is the largest record (key, value and headers) a service
// hands its transactional producer: kgo refuses a record whose batch
// would exceed ProducerBatchMaxBytes (MaxRecordBytes), every topic is
// created with max.message.bytes MaxRecordBytes, and a batch adds its own
// overhead.
const RecordLimit = MaxRecordBytes - 16<<10

// BigRecord is the smallest record taken to be the cause when a broker
// refuses a batch of several records as too large: a batch of small
// records over the limit means the topic's max.message.bytes is below
// Hookline's batches, which no single delivery can fix.
const BigRecord = 64 << 10

// Backoff bounds.
const (
	AbortBackoffMin = 100 * time.Millisecond
	AbortBackoffMax = 30 * time.Second
	// TransientBackoffMax caps the backoff after aborts Kafka itself
	// caused (a broker restarting, a leader moving): they end by
	// themselves, and a long wait would only delay the recovery.
	TransientBackoffMax = 2 * time.Second
)

// Abort reasons.
const (
	AbortTransient  = "transient"  // Kafka aborted it (a broker restarting, a rebalance)
	AbortRefused    = "refused"    // a refusal no record can fix (authorization, a missing topic)
	AbortUnwritable = "unwritable" // a record was refused for what it is; its delivery is blamed
)

// RecordBytes is r's size as the limit counts it.
func RecordBytes(r *kgo.Record) int {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// OverLimit says why r is over RecordLimit, or "".
func OverLimit(r *kgo.Record) string {
	if n := RecordBytes(r); n > RecordLimit {
		return fmt.Sprintf("a record of %d bytes for %s is over the %d-byte limit", n, r.Topic, RecordLimit)
	}
	return ""
}

// RecordFault reports whether err says a record can never be written as
// it is (rather than that Kafka is unavailable or refuses every write).
func RecordFault(err error) bool {
	return errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge) || errors.Is(err, kerr.InvalidRecord)
}

// Refusal reports whether err is a refusal no retry can fix: writes
// Kafka will not take until an operator changes something.
func Refusal(err error) bool {
	return RecordFault(err) ||
		errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || errors.Is(err, kerr.InvalidTopicException) ||
		errors.Is(err, kerr.PolicyViolation) || errors.Is(err, kerr.UnsupportedForMessageFormat)
}

// Refused is a record a broker did not take, and why.
type Refused struct {
	R   *kgo.Record
	Err error
}

// Blame classifies an aborted transaction's refused records: it returns
// the abort's reason and, by delivery id (deliveryOf names the delivery
// a record is about, "" if none), why each blamed delivery's record was
// refused. A broker refuses a whole batch, so every record of a
// partition's batch carries the error: in a partition with one refused
// record that record is blamed; with several, only the largest, and only
// if it is big enough to be the cause (BigRecord).
func Blame(failed []Refused, deliveryOf func(*kgo.Record) string) (string, map[string]string) {
	byPart := map[TopicPartition][]Refused{}
	reason := AbortTransient
	for _, f := range failed {
		if Refusal(f.Err) {
			reason = AbortRefused
		}
		if RecordFault(f.Err) {
			k := TopicPartition{f.R.Topic, f.R.Partition}
			byPart[k] = append(byPart[k], f)
		}
	}
	var blamed map[string]string
	for _, fs := range byPart {
		sort.Slice(fs, func(i, j int) bool { return RecordBytes(fs[i].R) > RecordBytes(fs[j].R) })
		if len(fs) > 1 && RecordBytes(fs[0].R) < BigRecord {
			continue
		}
		if id := deliveryOf(fs[0].R); id != "" {
			if blamed == nil {
				blamed = map[string]string{}
			}
			blamed[id] = fmt.Sprintf("%s refused a record of %d bytes: %v", fs[0].R.Topic, RecordBytes(fs[0].R), fs[0].Err)
			reason = AbortUnwritable
		}
	}
	return reason, blamed
}

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Backoff is the pause after aborted transactions, per partition: the
// n-th abort in a row of a partition's work waits AbortBackoffMin·2ⁿ⁻¹,
// up to TransientBackoffMax for transient aborts and AbortBackoffMax
// otherwise; a transaction's wait is its partitions' longest. Only a
// commit carrying a partition's work resets that partition. Not safe for
// concurrent use (one transaction at a time).
type Backoff struct {
	n map[TopicPartition]int
}

// Aborted counts an abort of a transaction carrying parts' work and
// returns the pause before that work is consumed again, and the longest
// run of aborts among parts.
func (b *Backoff) Aborted(parts []TopicPartition, reason string) (time.Duration, int) {
	if b.n == nil {
		b.n = map[TopicPartition]int{}
	}
	n := 1
	for _, p := range parts {
		b.n[p]++
		n = max(n, b.n[p])
	}
	if len(parts) == 0 {
		b.n[TopicPartition{}]++ // work of no partition: counted on its own
		n = b.n[TopicPartition{}]
	}
	return AbortBackoff(n, reason), n
}

// Committed resets the partitions whose work a commit carried.
func (b *Backoff) Committed(parts []TopicPartition) {
	for _, p := range parts {
		delete(b.n, p)
	}
	delete(b.n, TopicPartition{})
}

// Forget drops the count of partitions no longer owned.
func (b *Backoff) Forget(p TopicPartition) { delete(b.n, p) }

// AbortBackoff is the pause after the n-th aborted transaction in a row.
func AbortBackoff(n int, reason string) time.Duration {
	limit := AbortBackoffMax
	if reason == AbortTransient {
		limit = TransientBackoffMax
	}
	return min(AbortBackoffMin<<min(n-1, 16), limit)
}

// UnwritableMemory is how long a delivery blamed for an abort stays
// marked: its record comes again right after the abort.
const UnwritableMemory = 10 * time.Minute

// Unwritables are the deliveries blamed for aborted transactions (Blame),
// by delivery id, each with why: when one comes again it is set aside
// instead of being produced again. Marks are forgotten after
// UnwritableMemory. Safe for concurrent use; the zero value is empty.
type Unwritables struct {
	n  atomic.Int32 // len(m), read without the lock on the hot path
	mu sync.Mutex
	m  map[string]unwritable
}

type unwritable struct {
	why string
	at  time.Time
}

// Mark blames id, for why, at now.
func (u *Unwritables) Mark(id, why string, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = map[string]unwritable{}
	}
	for k, v := range u.m {
		if now.Sub(v.at) > UnwritableMemory {
			delete(u.m, k)
		}
	}
	u.m[id] = unwritable{why: why, at: now}
	u.n.Store(int32(len(u.m)))
}

// Reset forgets every mark, as a fresh process knows none (a service's
// new session: docs/DESIGN.md I40).
func (u *Unwritables) Reset() {
	u.mu.Lock()
	defer u.mu.Unlock()
	clear(u.m)
	u.n.Store(0)
}

// Any reports whether some delivery is marked (no lock).
func (u *Unwritables) Any() bool { return u.n.Load() > 0 }

// Reason says why id was blamed, or "".
func (u *Unwritables) Reason(id string) string {
	if !u.Any() {
		return ""
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.m[id].why
}
