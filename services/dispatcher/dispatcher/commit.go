package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// committer builds the loop's commits and carries the one in progress:
// what it popped and took above the watermark, its share of the lanes
// topic, the gate that keeps polls out of its End, and the backoff after
// an abort. Loop goroutine only, but for what its transaction's
// goroutine touches (gate, and the inbox it reports to).
type committer struct {
	// What it is given: the window it commits, the inbox its
	// transaction reports to, the membership each offset commit is
	// checked against, the loop's work context (a backoff ends with it),
	// and the Service's accounting of a transaction's end (after:
	// Service.afterTransaction; pauses: the automatic pauses its records
	// settle; answered: Service.answersCommitted).
	w        *window
	in       *inbox
	member   *hkafka.Membership
	work     context.Context
	cfg      *Config
	log      *slog.Logger
	after    func(committed, aborted bool, failed []refused, records int, produceErr error, parts []hkafka.TopicPartition) (time.Duration, map[string]string)
	pauses   *pendingPauses
	answered func([]*entry)

	// committing is set while a commit's transaction runs: no second
	// commit meanwhile. gate keeps polls out of its End.
	committing bool
	gate       pollGate
	// lastCommit is when the last commit ended: the next starts at least
	// CommitInterval later, so the loop polls between commits even when
	// a commit takes longer than the interval.
	lastCommit time.Time
	// lanes is the lanes topic's share of the commit being built and
	// of the one in progress: the entries with a lane change it popped,
	// and their changes, kept or taken back at its end (lanes.go).
	lanes laneCommit
	// txn are the entries the commit in progress popped: an abort Kafka
	// caused puts them back, their lane changes (lanes) with them
	// (keepTxn). backingOff is set from an aborted commit until its
	// backoff ends: no attempt starts meanwhile (duplicates stay bounded:
	// docs/DESIGN.md, "What a crash, a rebalance or an outage re-POSTs").
	txn        []*entry
	backingOff bool
	// txnAbove are the entries the commit in progress carries above
	// their watermark; skip the offsets committed so (above.go).
	txnAbove []*entry
	skip     skips
	// retrying is set from a commit Kafka aborted until one lands: the
	// work it kept commits before new attempts start.
	retrying bool
	// commitStarted is when the commit in progress began.
	commitStarted time.Time
	// begun and ended count commits (the rebalance hand-off waits for
	// one begun after it: yield.go).
	begun, ended uint64
}

// popped takes en, which the commit being built popped (window.popDone):
// an abort puts it back (keepTxn), its lane change with it.
func (c *committer) popped(en *entry) {
	c.txn = append(c.txn, en)
	if en.opKey != nil {
		c.lanes.add(en)
	}
}

// popAll pops every partition's completed prefix for the commit being
// built (c.txn), held by the window until the commit ends (holdTxn): the
// outputs to write, each partition's watermark, and the partitions whose
// work they carry.
func (c *committer) popAll(now time.Time) ([]*kgo.Record, map[string]map[int32]kgo.EpochOffset, []hkafka.TopicPartition) {
	var outs []*kgo.Record
	marks := map[string]map[int32]kgo.EpochOffset{}
	var parts []hkafka.TopicPartition
	clear(c.txn)
	c.txn = c.txn[:0]
	c.lanes.dropOps()
	for k, pw := range c.w.parts {
		var mark int64
		var moved bool
		outs, mark, moved = c.w.popDone(pw, now, outs) // popped entries: c.txn
		if moved {
			parts = append(parts, hkafka.TopicPartition{Topic: k.topic, Partition: k.partition})
		}
		if marks[k.topic] == nil {
			marks[k.topic] = map[int32]kgo.EpochOffset{}
		}
		marks[k.topic][k.partition] = kgo.EpochOffset{Epoch: pw.epoch, Offset: mark}
	}
	c.w.done = 0
	c.w.holdTxn(c.txn)
	return outs, marks, parts
}

// commit writes, in one transaction, the outputs of every partition's
// completed prefix and moves each partition's committed offset to its
// watermark.
//
// franz-go's transactional session commits the offsets it has polled.
// Rewinding the session to the watermark before each commit (SetOffsets)
// would also rewind fetching, so every commit would fetch the window
// above a stuck head again. Instead the commit request itself is
// rewritten (kgo.PreTxnCommitFnContext): each partition's offset becomes
// its watermark, and fetching goes on from where it was. After a commit
// the session records exactly what was sent as committed. The cost of a
// commit is the records it writes, never the window's size.
//
// The transaction runs on a goroutine of its own: meanwhile the loop goes
// on collecting completions, starting attempts from the lanes and
// polling; only while End runs is polling shut out (a transactional
// session does not allow a poll during End: see pollGate), and after an
// aborted End until the loop has dropped its window and backed off, since
// the session rewound to the committed offsets. Its end comes back
// through the inbox (msgCommitted). commit returns whether a
// transaction began (nothing to write: none), which the loop counts as
// outstanding until its end comes back.
func (c *committer) commit(ctx context.Context, sess *kgo.GroupTransactSession, now time.Time) bool {
	outs, marks, parts := c.popAll(now)
	outs, parts, metas := c.commitAbove(outs, parts, marks)
	outs = c.lanes.outputs(outs)
	c.begun++
	if len(outs) == 0 {
		c.ended++
		c.w.endTxn()
		c.aboveEnded(false) // no transaction: they are taken by the next
		return false
	}
	c.committing = true
	c.commitStarted = now
	// The windows the commit was built from, one per partition it names
	// an offset for: a partition whose window a revoke or a loss dropped
	// since is no longer this commit's to write (atWatermarks).
	built := make(map[hkafka.TopicPartition]*partWindow, len(c.w.parts))
	for k, pw := range c.w.parts {
		built[hkafka.TopicPartition{Topic: k.topic, Partition: k.partition}] = pw
	}
	tctx := kgo.PreTxnCommitFnContext(ctx, func(req *kmsg.TxnOffsetCommitRequest) error {
		if err := c.member.CommitAs(req); err != nil {
			return err // the session's member was expelled since: its work is stale
		}
		err := atWatermarks(req, marks, parts, func(p hkafka.TopicPartition) bool { return c.w.owns(built[p]) })
		withAbove(req, metas)
		return err
	})
	go func() {
		began := time.Now()
		var mu sync.Mutex
		var failed []refused
		ending := false
		var endBegan time.Time
		committed, perr, err := hkafka.TransactEach(tctx, sess, c.cfg.TxnTimeout, outs, func() {
			ending = true
			endBegan = time.Now()
			c.gate.close(c.in)
		}, func(r *kgo.Record, err error) {
			mu.Lock()
			failed = append(failed, refused{R: r, Err: err})
			mu.Unlock()
		})
		if !ending {
			c.gate.close(c.in) // failed before End: the loop reopens it
		}
		if committed && err == nil {
			c.gate.open()
		}
		c.gate.endDone()
		aborted := !committed && err == nil
		wait, blamed := c.after(committed, aborted, failed, len(outs), perr, parts)
		c.pauses.committed(ctx, outs, committed && err == nil)
		var endTook time.Duration
		if ending {
			endTook = time.Since(endBegan)
		}
		c.in.post(msg{kind: msgCommitted, committed: committed, produceErr: perr, err: err, records: len(outs), took: time.Since(began), ending: endTook, blamed: blamed})
		if aborted {
			// The window starts over; each partition's new window reads
			// the lanes view before any of its records is placed
			// (resolve.go).
			// Back off before the window is consumed again; the loop
			// stays committing (no poll) until this ends.
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			case <-c.work.Done(): // the loop ended (end)
				t.Stop()
			}
			c.in.post(msg{kind: msgCommitted, produceErr: errBackoffEnded})
		}
	}()
	return true
}

// committed takes a commit's end: an aborted transaction wrote nothing
// and the session rewound to the committed offsets, so the window starts
// over from there; a failed session ends the loop, and when the end's
// outcome is unknown (hkafka.ErrUnconfirmed) a new session resumes from
// what Kafka committed (hkafka.Resume).
//
// After an aborted commit the loop stays committing, polling nothing,
// until the commit's goroutine has backed off (produce.go) and posts
// errBackoffEnded: backoff says so, and the loop counts that message
// and sweeps the partitions the abort dropped (the window, when
// stopping; a blamed delivery's partitions) before it takes another.
func (c *committer) committed(m *msg, now time.Time, stopping bool) (backoff bool, err error) {
	c.committing = false
	if errors.Is(m.produceErr, errBackoffEnded) {
		c.gate.open()
		c.backingOff = false
		return false, nil
	}
	c.lastCommit = now
	c.ended++
	c.w.endTxn()
	c.lanes.ended(m.committed && m.err == nil)
	c.aboveEnded(m.committed && m.err == nil)
	if m.committed && m.err == nil {
		c.answered(c.txn)
		clear(c.txn)
		c.txn = c.txn[:0]
		c.retrying = false
	}
	c.log.Debug("commit ended", "records", m.records, "took", m.took, "end_took", m.ending, "committed", m.committed)
	if m.err != nil {
		return false, fmt.Errorf("dispatcher: %w", m.err)
	}
	if !m.committed {
		c.retrying = !stopping
		if stopping {
			// The loop is stopping: what did not commit is consumed
			// again by the next owner, and nothing is tried again here.
			c.w.forgetAll()
		} else {
			// What the kept partitions completed stays done and is
			// committed by the next transaction, never attempted again,
			// whatever aborted this one: Kafka (a rebalance, a
			// coordinator moving), a produce that failed (a broker
			// dying: every record of the transaction fails with it), or
			// a refusal no record can fix. Only the partitions that
			// moved away lose their work, and those of a delivery
			// blamed for a refused record, which must come again to be
			// set aside (produce.go).
			c.forgetBlamed(m.blamed)
			c.keepTxn()
		}
		clear(c.txn)
		c.txn = c.txn[:0]
		c.lanes.dropOps()
		c.committing = true // until the backoff ends
		c.backingOff = true
		return true, nil
	}
	return false, nil
}

// answersCommitted forgets the receivers' answers whose settlements a
// commit wrote (answered.go).
func (s *Service) answersCommitted(ens []*entry) {
	if n, _ := s.answered.size(); n == 0 {
		return // no key to build
	}
	keys := make([]answerKey, 0, len(ens))
	for _, en := range ens {
		if en.d != nil && en.rec != nil {
			keys = append(keys, answerKeyOf(en.rec, en.d))
		}
		if en.formed != nil { // the batch its lane formed with it (batch.go)
			keys = append(keys, *en.formed)
		}
	}
	s.answered.forget(keys...)
}

// forgetBlamed drops the partitions whose entries an aborted commit
// blamed (hkafka.Blame): the session rewound them, so their records come
// again and the blamed delivery is set aside then. A blamed delivery the
// commit did not pop (a lanes record naming a member settled earlier)
// has no partition to name here: the whole window starts over, as every
// refusal once did.
func (c *committer) forgetBlamed(blamed map[string]string) {
	if len(blamed) == 0 {
		return
	}
	parts := map[string][]int32{}
	found := map[string]bool{}
	for _, en := range c.txn {
		if id := en.d.GetDeliveryId(); id != "" && blamed[id] != "" {
			found[id] = true
			parts[en.part.k.topic] = append(parts[en.part.k.topic], en.part.k.partition)
		}
	}
	if len(found) < len(blamed) {
		c.w.forgetAll()
		return
	}
	c.w.forget(parts)
}

// keepTxn puts the entries an aborted commit popped back at the head of
// their partitions, with their lane changes, for the partitions still
// owned; those of dropped partitions go with their partition (sweep).
// The session rewound its fetch positions to the committed offsets: the
// records it fetches again are below each partition's next offset and
// skipped (window.add), so nothing the window holds is placed twice.
func (c *committer) keepTxn() {
	w := c.w
	byPart := map[*partWindow][]*entry{}
	for _, en := range c.txn {
		byPart[en.part] = append(byPart[en.part], en)
	}
	owned := w.ownsLocked
	w.mu.Lock()
	for pw, ens := range byPart {
		if !owned(pw) {
			continue
		}
		rest := pw.entries[pw.head:]
		pw.entries = append(append(make([]*entry, 0, len(ens)+len(rest)), ens...), rest...)
		pw.head = 0
		for _, en := range ens {
			w.charge(en, 1)
			w.done++
		}
	}
	// The lane changes go back to their entries, popped ones and those
	// taken above the watermark (aboveEnded made them candidates again)
	// alike, while their partition is owned.
	c.lanes.giveBack(owned)
	w.mu.Unlock()
}

// atWatermarks sets each partition of an offset commit to its watermark;
// a partition the window does not hold (it was dropped) is left out, so
// nothing is committed past a record this dispatcher did not finish.
//
// A partition whose work the transaction carries (parts) must be in the
// request. franz-go builds the request from what the session polled: it
// leaves out a partition not polled past its committed offset, which is
// every partition after an aborted commit rewound the session, until a
// poll fetches it again. A full window polls nothing, and a partition
// over its share is not fetched (window.go), so the commit that keeps
// an aborted one's work would go without those partitions for ever
// (make sim seeds 9 and 24, a window of 11-12 deliveries: every commit
// aborted). So a carried partition the window still owns (owned: no
// revoke or loss has marked it since the commit was built) is added,
// at its watermark. One it no longer owns (a revoke takes the partition
// out of the session only after the callback that marks it dropped) is
// not: its outputs would commit without its offset and its next owner
// would write them again (I3); the error wraps REBALANCE_IN_PROGRESS,
// which makes the session abort the transaction like any rebalance
// (never fail). The same holds for a partition the request does name
// but the window dropped since the commit was built (a loss, seen after
// a freeze beyond the session: the session rejoined while the commit's
// End waited, and named the partition again under the new generation):
// its outputs and its old watermark are its next owner's to write.
func atWatermarks(req *kmsg.TxnOffsetCommitRequest, marks map[string]map[int32]kgo.EpochOffset, parts []hkafka.TopicPartition, owned func(hkafka.TopicPartition) bool) error {
	present := map[hkafka.TopicPartition]bool{}
	topics := req.Topics[:0]
	for _, t := range req.Topics {
		kept := t.Partitions[:0]
		for _, p := range t.Partitions {
			m, ok := marks[t.Topic][p.Partition]
			if !ok {
				continue
			}
			part := hkafka.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			if !owned(part) {
				// Dropped since the commit was built (a loss, or a revoke
				// the session has not caught up with): its watermark may be
				// below what its next owner committed meanwhile, and its
				// outputs that owner's to write (make sim seed 43, two
				// terminal results).
				return fmt.Errorf("%w: partition %s/%d was dropped since this commit was built; aborting", kerr.RebalanceInProgress, t.Topic, p.Partition)
			}
			present[part] = true
			p.Offset, p.LeaderEpoch = m.Offset, m.Epoch
			kept = append(kept, p)
		}
		if len(kept) > 0 {
			t.Partitions = kept
			topics = append(topics, t)
		}
	}
	req.Topics = topics
	for _, p := range parts {
		if present[p] {
			continue
		}
		if !owned(p) {
			return fmt.Errorf("%w: partition %s/%d has outputs in this transaction but is not in its offset commit (revoked); aborting", kerr.RebalanceInProgress, p.Topic, p.Partition)
		}
		m, ok := marks[p.Topic][p.Partition]
		if !ok {
			return fmt.Errorf("%w: partition %s/%d has outputs in this transaction but no watermark; aborting", kerr.RebalanceInProgress, p.Topic, p.Partition)
		}
		addOffset(req, p, m)
		present[p] = true
	}
	return nil
}

// addOffset adds partition p at m to an offset commit. A topic new to
// the request has no topic id, so franz-go sends the request in a
// version that names topics (v5).
func addOffset(req *kmsg.TxnOffsetCommitRequest, p hkafka.TopicPartition, m kgo.EpochOffset) {
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = p.Partition, m.Offset, m.Epoch
	for i := range req.Topics {
		if req.Topics[i].Topic == p.Topic {
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
			return
		}
	}
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = p.Topic
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
}

// pollGate keeps the loop from polling while a transaction ends (a
// session may not poll during End) and, after an aborted End, until the
// loop has dropped the window the session rewound: a record polled from
// the rewound position would otherwise be taken for one polled before and
// skipped. Safe for concurrent use.
type pollGate struct {
	mu     sync.Mutex // held by a poll in progress, and by End
	shut   atomic.Bool
	locked bool // End holds mu (the commit goroutine's own)
}

// close shuts polling out and waits for a poll in progress to return
// (the commit goroutine, before End).
func (g *pollGate) close(in *inbox) {
	g.shut.Store(true)
	in.wake() // cancels a poll in progress
	g.mu.Lock()
	g.locked = true
}

// endDone lets a poll start again once the gate opens.
func (g *pollGate) endDone() {
	if g.locked {
		g.locked = false
		g.mu.Unlock()
	}
}

// open lets the loop poll again.
func (g *pollGate) open() { g.shut.Store(false) }

// closed reports whether polling is shut out.
func (g *pollGate) closed() bool { return g.shut.Load() }

// commitStall is how long a commit may run before the loop stops
// starting attempts until one lands (a broker outage, a coordinator
// moving): what completes while commits cannot land is what a crash
// re-POSTs.
const commitStall = time.Second

// attemptsMayStart reports whether the commits let the loop start
// attempts now: not while it backs off after an aborted commit, nor
// until the work that commit kept has committed, nor while a commit has
// run past max(commitStall, CommitInterval). Nor do they start while a
// rebalance that moves partitions away is handed off (the loop's pump
// asks handOff.attemptsHeld too: yield.go). docs/DESIGN.md, "What a
// crash, a rebalance or an outage re-POSTs".
func (c *committer) attemptsMayStart(now time.Time) bool {
	stalled := c.committing && now.Sub(c.commitStarted) > max(commitStall, c.cfg.CommitInterval)
	kept := c.retrying && (c.committing || c.w.done > 0)
	return !c.backingOff && !stalled && !kept
}
