package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

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
// on collecting completions and starting attempts from the lanes (it
// only stops polling, which a transactional session does not allow
// during End). Its end comes back through the inbox (msgCommitted).
func (e *engine) commit(ctx context.Context, sess *kgo.GroupTransactSession, now time.Time) {
	var outs []*kgo.Record
	marks := map[string]map[int32]kgo.EpochOffset{}
	for k, pw := range e.w.parts {
		var mark int64
		outs, mark, _ = e.w.popDone(pw, now, outs)
		if marks[k.topic] == nil {
			marks[k.topic] = map[int32]kgo.EpochOffset{}
		}
		marks[k.topic][k.partition] = kgo.EpochOffset{Epoch: pw.epoch, Offset: mark}
	}
	e.w.done = 0
	if len(outs) == 0 {
		return
	}
	e.committing = true
	e.outstanding++
	tctx := kgo.PreTxnCommitFnContext(ctx, func(req *kmsg.TxnOffsetCommitRequest) error {
		atWatermarks(req, marks)
		return nil
	})
	go func() {
		began := time.Now()
		var mu sync.Mutex
		var failed []refused
		committed, perr, err := hkafka.TransactEach(tctx, sess, outs, nil, func(r *kgo.Record, err error) {
			mu.Lock()
			failed = append(failed, refused{r, err})
			mu.Unlock()
		})
		aborted := !committed && err == nil
		wait := e.s.afterTransaction(committed, aborted, failed, len(outs), perr)
		e.s.pausesCommitted(ctx, outs, committed && err == nil)
		e.in.post(msg{kind: msgCommitted, committed: committed, produceErr: perr, err: err, records: len(outs), took: time.Since(began)})
		if aborted {
			// Back off before the window is consumed again; the loop
			// stays committing (no poll) until this ends.
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
			e.in.post(msg{kind: msgCommitted, produceErr: errBackoffEnded})
		}
	}()
}

// committed takes a commit's end: an aborted transaction wrote nothing
// and the session rewound to the committed offsets, so the window starts
// over from there; a failed session ends the loop.
//
// After an aborted commit the loop stays committing, polling nothing,
// until the commit's goroutine has backed off (produce.go) and posts
// errBackoffEnded.
func (e *engine) committed(m *msg, now time.Time) error {
	e.committing = false
	if errors.Is(m.produceErr, errBackoffEnded) {
		return nil
	}
	e.lastCommit = now
	e.s.log.Debug("commit ended", "records", m.records, "took", m.took, "committed", m.committed)
	if m.err != nil {
		return fmt.Errorf("dispatcher: %w", m.err)
	}
	if !m.committed {
		e.w.forgetAll()
		e.sweep(now)
		e.committing, e.outstanding = true, e.outstanding+1 // until the backoff ends
	}
	return nil
}

// atWatermarks sets each partition of an offset commit to its watermark;
// a partition the window does not hold (it was dropped) is left out, so
// nothing is committed past a record this dispatcher did not finish.
func atWatermarks(req *kmsg.TxnOffsetCommitRequest, marks map[string]map[int32]kgo.EpochOffset) {
	topics := req.Topics[:0]
	for _, t := range req.Topics {
		parts := t.Partitions[:0]
		for _, p := range t.Partitions {
			m, ok := marks[t.Topic][p.Partition]
			if !ok {
				continue
			}
			p.Offset, p.LeaderEpoch = m.Offset, m.Epoch
			parts = append(parts, p)
		}
		if len(parts) > 0 {
			t.Partitions = parts
			topics = append(topics, t)
		}
	}
	req.Topics = topics
}
