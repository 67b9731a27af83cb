package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/telemetry"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The dispatch loop completes deliveries out of order and commits in
// order. Each polled record is attempted at once on its own goroutine
// (bounded by --workers); a slow receiver holds only its own records.
// Every --commit-interval the loop commits, in one Kafka transaction, the
// outputs of each partition's contiguous completed prefix together with
// the offset just past it (the low watermark). Outputs of records
// completed above a still-running one wait in memory until the watermark
// passes them, so a crash repeats attempts (receivers deduplicate on
// webhook-id) but never writes a Kafka record twice and never loses one.
//
// franz-go's transactional session commits the offsets it has polled, so
// before each commit the loop sets every partition's offset back to its
// watermark (SetOffsets). That also rewinds fetching to the watermark: the
// records above it come again and are skipped by offset.

type tp struct {
	topic     string
	partition int32
}

// partState is one partition's window.
type partState struct {
	pending []*kgo.Record           // polled, not yet committed, in offset order
	done    map[int64][]*kgo.Record // outputs of completed pending records
	next    int64                   // offset after the last record polled
	epoch   int32
}

type completion struct {
	k      tp
	ps     *partState // the window it was polled into
	offset int64
	outs   []*kgo.Record
}

// window is the dispatch loop's state. Only the loop goroutine touches
// parts and inFlight; partition callbacks mark dropped partitions, which
// the loop sweeps away. A completion whose partition state was swept (or
// replaced) meanwhile is discarded.
type window struct {
	parts    map[tp]*partState
	inFlight int
	results  chan completion
	mu       sync.Mutex
	dropped  map[tp]bool
	// lag reports what the owned partitions hold beyond the last poll.
	lag *telemetry.Lag
}

// newWindow sizes the results channel so a finishing attempt never
// blocks: at most workers are running and one poll is being started.
func newWindow(workers, batch int) *window {
	return &window{parts: map[tp]*partState{}, results: make(chan completion, workers+batch), dropped: map[tp]bool{}}
}

// forget drops partitions this instance no longer owns.
func (w *window) forget(m map[string][]int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for t, ps := range m {
		for _, p := range ps {
			w.dropped[tp{t, p}] = true
		}
	}
}

// forgetAll drops everything: after an aborted commit the session rewound
// to the committed offsets, and every record above them comes again.
func (w *window) forgetAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k := range w.parts {
		w.dropped[k] = true
	}
}

// sweep removes dropped partitions' state (loop goroutine only).
func (w *window) sweep() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k := range w.dropped {
		delete(w.parts, k)
	}
	clear(w.dropped)
}

// dispatch is the loop: poll, attempt out of order, commit in order.
func (s *Service) dispatch(ctx context.Context, sess *kgo.GroupTransactSession, w *window) error {
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	sem := make(chan struct{}, s.cfg.Workers)
	lastCommit := time.Now()
	for {
		stopping := ctx.Err() != nil
		if !stopping {
			// Block for records only when nothing waits to be committed.
			pctx, cancel := ctx, context.CancelFunc(func() {})
			if w.inFlight > 0 || s.anyDone(w) {
				pctx, cancel = context.WithTimeout(ctx, s.cfg.CommitInterval)
			}
			fs := sess.PollRecords(pctx, s.cfg.BatchSize)
			cancel()
			if fs.IsClientClosed() {
				return nil
			}
			w.lag.Observe(fs)
			fs.EachError(func(t string, p int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					s.log.Warn("fetch error", "topic", t, "partition", p, "err", err)
				}
			})
			w.sweep()
			fs.EachRecord(func(r *kgo.Record) {
				k := tp{r.Topic, r.Partition}
				ps := w.parts[k]
				if ps == nil {
					ps = &partState{done: map[int64][]*kgo.Record{}}
					w.parts[k] = ps
				}
				if r.Offset < ps.next {
					return // fetched again after a rewind to the watermark
				}
				ps.next, ps.epoch = r.Offset+1, r.LeaderEpoch
				ps.pending = append(ps.pending, r)
				w.inFlight++
				sem <- struct{}{}
				go func() {
					outs := s.handleSafely(work, r)
					<-sem
					w.results <- completion{k: k, ps: ps, offset: r.Offset, outs: outs}
				}()
			})
		}
		// Collect what finished; when stopping, wait for the rest (bounded).
		s.collect(w, stopping, cancelWork)
		if stopping || time.Since(lastCommit) >= s.cfg.CommitInterval {
			if err := s.commit(ctx, sess, w); err != nil {
				return err
			}
			lastCommit = time.Now()
		}
		if stopping && w.inFlight == 0 {
			return nil
		}
	}
}

func (s *Service) anyDone(w *window) bool {
	for _, ps := range w.parts {
		if len(ps.done) > 0 {
			return true
		}
	}
	return false
}

// collect records finished attempts. When stopping it waits for every
// in-flight attempt, up to DrainTimeout, then gives up on the rest: their
// records stay uncommitted and are attempted again after the restart.
func (s *Service) collect(w *window, stopping bool, cancelWork context.CancelFunc) {
	var deadline <-chan time.Time
	if stopping {
		t := time.NewTimer(s.cfg.DrainTimeout)
		defer t.Stop()
		deadline = t.C
	}
	for w.inFlight > 0 {
		var c completion
		if stopping {
			select {
			case c = <-w.results:
			case <-deadline:
				cancelWork()
				for w.inFlight > 0 { // they return at once now
					<-w.results
					w.inFlight--
				}
				return
			}
		} else {
			select {
			case c = <-w.results:
			default:
				return
			}
		}
		w.inFlight--
		if w.parts[c.k] != c.ps {
			continue // its partition was revoked or rewound meanwhile
		}
		c.ps.done[c.offset] = c.outs
	}
}

// commit writes the outputs of every partition's completed prefix and
// moves its offset to the watermark, in one transaction.
func (s *Service) commit(ctx context.Context, sess *kgo.GroupTransactSession, w *window) error {
	var outs []*kgo.Record
	offsets := map[string]map[int32]kgo.EpochOffset{}
	for k, ps := range w.parts {
		n := 0
		for n < len(ps.pending) {
			o, ok := ps.done[ps.pending[n].Offset]
			if !ok {
				break
			}
			outs = append(outs, o...)
			n++
		}
		// Every partition gets its watermark, also one whose head is still
		// in flight: the session would otherwise commit all it polled.
		for _, r := range ps.pending[:n] {
			delete(ps.done, r.Offset)
		}
		ps.pending = ps.pending[n:]
		mark := ps.next
		if len(ps.pending) > 0 {
			mark = ps.pending[0].Offset
		}
		if offsets[k.topic] == nil {
			offsets[k.topic] = map[int32]kgo.EpochOffset{}
		}
		offsets[k.topic][k.partition] = kgo.EpochOffset{Epoch: ps.epoch, Offset: mark}
	}
	if len(outs) == 0 {
		return nil
	}
	// Commit up to each watermark, not what was polled.
	committed, perr, err := hkafka.Transact(ctx, sess, outs, func() { sess.Client().SetOffsets(offsets) })
	if err != nil {
		return fmt.Errorf("dispatcher: %w", err)
	}
	if !committed {
		// Nothing of it is visible and the session rewound to the
		// committed offsets: start over from there.
		s.log.Warn("commit aborted; uncommitted deliveries will be attempted again", "records", len(outs), "produce_err", perr)
		w.forgetAll()
		w.sweep()
	}
	return nil
}
