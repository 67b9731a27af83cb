package dispatcher

import (
	"sync"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/services/dispatcher/attempt"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A receiver that answered 2xx has the webhook, whether or not the
// settlement that records it commits. When it does not — the session
// ended in an outage longer than the session timeout, or the partitions
// were lost and came back — the window is gone and the records are
// fetched again from the committed offsets: attempting them again would
// POST what the receiver already took (a duplicate it must deduplicate
// on webhook-id). The dispatcher remembers the 2xx answers whose
// settlement has not committed yet, by the record they answered (its
// partition and offset, and its delivery id and attempt, so that a
// partition's offsets starting over — a topic deleted and made again —
// never match a stale answer), and that record fetched again settles
// from its answer instead of a new request. A copy of a delivery at
// another offset is not that record: dedupe.go settles it. The process
// keeps them across sessions (they are what a receiver did, not what a
// session derived: DESIGN.md I40); a crash loses them unless an answer
// journal keeps them (answerjournal.go, --answers-dir), and a partition
// that another dispatcher takes loses them (its new owner never saw the
// answer). An answer leaves when its settlement commits, or, oldest
// first, once the answers held exceed answeredBytes.
//
// Only successes are kept: a failed attempt's record fetched again is
// attempted again, as the failure may have been the receiver's moment.
// An answer is used only while the endpoint's URL is the one it came
// from.

// answeredBytes bounds the memory of the answers held: at about 300
// bytes an answer with a short body excerpt, some 50,000 answers.
const answeredBytes = 16 << 20

// answerOverhead is what an answer costs beside its key, URL and
// excerpt: the map entry, the queue slot, the Result.
const answerOverhead = 200

// answered holds the receivers' 2xx answers not committed yet. Safe for
// concurrent use: attempts put and take on worker goroutines, commits
// forget on the loop.
type answered struct {
	mu    sync.Mutex
	m     map[answerKey]answer
	queue []queued // oldest first from head; keys no longer in m are skipped
	head  int
	seq   uint64
	bytes int64
	max   int64
	j     *answerJournal // nil: memory only
}

type answer struct {
	ar   attempt.Result
	url  string
	seq  uint64
	size int64
	seg  int // the journal segment that holds it; 0: none
}

// answerKey names the delivery record an answer was to.
type answerKey struct {
	partition int32
	offset    int64
	delivery  string
	attempt   uint32
}

// answerKeyOf is the answer key of r, which decodes to d.
// A batch's is by its id, which names every member (batch.go): a batch
// formed again after a lost commit settles from its answer only if it
// has the same members, never one with a member the receiver did not
// get.
func answerKeyOf(r *kgo.Record, d *hooklinev1.Delivery) answerKey {
	return answerKey{partition: r.Partition, offset: r.Offset, delivery: d.GetDeliveryId(), attempt: d.GetAttempt()}
}

type queued struct {
	key answerKey
	seq uint64
}

func newAnswered(maxBytes int64) *answered {
	return &answered{m: map[answerKey]answer{}, max: maxBytes}
}

// put remembers a 2xx answer to the record of key, sent to url, and
// writes it to the journal if there is one.
func (a *answered) put(key answerKey, url string, ar attempt.Result) {
	size := int64(len(key.delivery)+len(url)+len(ar.Excerpt)) + answerOverhead
	if size > a.max {
		return
	}
	ar.Excerpt = append([]byte(nil), ar.Excerpt...) // the attempt's buffer is not ours
	seg := 0
	if a.j != nil {
		seg = a.j.write(key, url, ar)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.hold(key, answer{ar: ar, url: url, size: size, seg: seg})
}

// hold puts an answer in the map, replacing one to the same record, and
// drops the oldest answers beyond the memory bound. With a.mu held.
func (a *answered) hold(key answerKey, an answer) {
	if old, ok := a.m[key]; ok {
		a.drop(key, old)
	}
	a.seq++
	an.seq = a.seq
	a.m[key] = an
	a.queue = append(a.queue, queued{key: key, seq: a.seq})
	a.bytes += an.size
	for a.bytes > a.max && a.head < len(a.queue) {
		q := a.queue[a.head]
		a.queue[a.head] = queued{}
		a.head++
		if cur, ok := a.m[q.key]; ok && cur.seq == q.seq {
			a.drop(q.key, cur)
		}
	}
	a.compact()
}

// drop lets the answer held for key go, in memory and in the journal's
// accounting. With a.mu held.
func (a *answered) drop(key answerKey, an answer) {
	delete(a.m, key)
	a.bytes -= an.size
	if a.j != nil {
		a.j.release(an.seg)
	}
}

// attach makes j the answers' journal and holds the answers it read
// (oldest first: a later answer to a record replaces an earlier one).
// A segment that holds none of them is removed. Called as Run starts,
// before any attempt can put an answer (put reads a.j unlocked).
func (a *answered) attach(j *answerJournal, read []journaled) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range read {
		size := int64(len(r.key.delivery)+len(r.url)+len(r.ar.Excerpt)) + answerOverhead
		if size > a.max {
			continue
		}
		a.hold(r.key, answer{ar: r.ar, url: r.url, size: size, seg: r.seg})
	}
	counts := map[int]int{}
	for _, an := range a.m {
		counts[an.seg]++
	}
	j.mu.Lock()
	for seg := range j.live {
		if seg == j.seg {
			continue
		}
		if counts[seg] == 0 {
			j.remove(seg)
		} else {
			j.live[seg] = counts[seg]
		}
	}
	j.mu.Unlock()
	a.j = j
}

// forgetCommitted drops the answers to records of partition below its
// committed offset: their settlements committed (an assignment's read of
// the committed offsets; answers a journal kept from before a crash).
func (a *answered) forgetCommitted(partition int32, committed int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for key, an := range a.m {
		if key.partition == partition && key.offset < committed {
			a.drop(key, an)
		}
	}
	a.compact()
}

// get returns the answer to the record of key if it came from url. The
// answer stays until its settlement commits (forget): an abort may need
// it again.
func (a *answered) get(key answerKey, url string) (attempt.Result, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	an, ok := a.m[key]
	if !ok || an.url != url {
		return attempt.Result{}, false
	}
	return an.ar, true
}

// forget drops the answers to the records of keys: their settlements
// committed. One lock for a commit's entries.
func (a *answered) forget(keys ...answerKey) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.m) == 0 {
		return
	}
	for _, key := range keys {
		if an, ok := a.m[key]; ok {
			a.drop(key, an)
		}
	}
	a.compact()
}

// compact drops the queue's dead slots (answers forgotten or replaced):
// those at its front at once, the rest once they outnumber the live
// ones, so the queue stays within a constant of the answers held. With
// a.mu held.
func (a *answered) compact() {
	for a.head < len(a.queue) && !a.live(a.queue[a.head]) {
		a.queue[a.head] = queued{}
		a.head++
	}
	if len(a.queue)-a.head <= 2*len(a.m)+1024 && a.head <= len(a.queue)/2 {
		return
	}
	n := 0
	for _, q := range a.queue[a.head:] {
		if a.live(q) {
			a.queue[n] = q
			n++
		}
	}
	clear(a.queue[n:])
	a.queue, a.head = a.queue[:n], 0
}

// live reports whether q is the queue slot of an answer held.
func (a *answered) live(q queued) bool {
	cur, ok := a.m[q.key]
	return ok && cur.seq == q.seq
}

// size is how many answers are held, and their bytes.
func (a *answered) size() (int, int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.m), a.bytes
}
