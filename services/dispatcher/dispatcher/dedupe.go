package dispatcher

import (
	"strconv"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A delivery record can be on the deliveries topic twice: a publish whose
// answer was lost (a broker failure, --publish-timeout) is retried with
// its idempotency key, and the retry writes the claim's deliveries again,
// with the same ids. Attempting both would send the receiver the same
// webhook twice (it deduplicates on webhook-id) and, worse, write two
// terminal results for one delivery. The dispatcher remembers the
// deliveries it placed lately, by content that only a copy repeats
// (delivery id, attempt, kind, due time), and settles a copy with
// nothing written. The same record fetched again (after an aborted
// commit or a rebalance rewound the partition) is not a copy: a copy is
// at another offset. It is bounded (recentDeliveries), so it covers
// copies written within a publish timeout of each other. A dispatcher
// that takes a partition over seeds it from the partition's recent
// past before the committed offset (lookback.go), so it also covers a
// copy written after a rebalance, restart or rolling upgrade.

// recentDeliveries is how many placed deliveries the dispatcher
// remembers: at 20,000 deliveries/s, ten seconds.
const recentDeliveries = 200_000

// recent is a first-in first-out map of delivery keys to where their
// record was. Loop goroutine only.
type recent struct {
	at   map[string]recordAt
	ring []string
	next int
}

type recordAt struct {
	partition int32
	offset    int64
}

func newRecent(n int) *recent {
	return &recent{at: make(map[string]recordAt, n), ring: make([]string, n)}
}

// copied reports whether a record of key k was placed before at another
// place than where; if not, it remembers k at where.
func (r *recent) copied(k string, where recordAt) bool {
	if prev, ok := r.at[k]; ok {
		return prev != where
	}
	if old := r.ring[r.next]; old != "" {
		delete(r.at, old)
	}
	r.ring[r.next] = k
	r.next = (r.next + 1) % len(r.ring)
	r.at[k] = where
	return false
}

// recordCopyKey is the copy key of rec, which decodes to d.
func recordCopyKey(rec *kgo.Record, d *hooklinev1.Delivery) string {
	return copyKey(d, header(rec, headerFaults)+"|"+header(rec, headerPutBack))
}

// copyKey is what two records of one delivery share only when one is a
// copy of the other: a retry, a deferral, a resend or a recovery differs
// in attempt, kind or due time, a delivery put back after a worker fault
// in its fault count, and one put back unchanged in its put-back mark
// (marks: the records' headers).
func copyKey(d *hooklinev1.Delivery, marks string) string {
	var due int64
	if t := d.GetDueAt(); t != nil {
		due = t.AsTime().UnixNano()
	}
	return d.GetDeliveryId() + "/" + strconv.FormatUint(uint64(d.GetAttempt()), 10) + "/" + strconv.Itoa(int(d.GetKind())) + "/" + strconv.FormatInt(due, 10) + "/" + marks
}
