package kafka

import (
	"context"
	"errors"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SyncAll waits until every record committed to any of the Follower's
// topics before SyncAll was called has been applied, as Sync does for
// one topic, with one ListOffsets request for all of them. Concurrent
// calls share requests: a call arriving while one is in flight waits for
// the next, which starts when that one ends and serves every call that
// arrived meanwhile (one sent before a call arrived may miss what the
// caller wrote just before), so a burst of N reads costs at most two
// round trips, not N. It returns within DefaultSyncTimeout even if ctx
// has no deadline; that failure wraps ErrSyncTimeout.
func (f *Follower) SyncAll(ctx context.Context) error {
	ctx, cancel := f.bound(ctx)
	defer cancel()
	if err := f.started(ctx); err != nil {
		return f.failed("sync", ctx, err)
	}
	targets, err := f.listRound(ctx)
	if err != nil {
		return f.failed("sync", ctx, err)
	}
	var errs []error
	for _, t := range f.topics {
		if err := f.waitFor(ctx, t, targets[t]); err != nil {
			errs = append(errs, f.failed("sync "+t, ctx, err))
		}
	}
	return errors.Join(errs...)
}

// offsetRound is one ListOffsets of every topic, shared by the calls
// that wait for it.
type offsetRound struct {
	done    chan struct{}
	waiters int // calls sharing it (tests read it)
	targets map[string]map[int32]int64
	err     error
}

// rounds is the state of SyncAll's shared requests.
type rounds struct {
	mu      sync.Mutex
	running bool
	next    *offsetRound // collects the calls that arrive while one runs
}

// listRound returns the last stable offsets of every topic as listed by
// a request sent after the call began.
func (f *Follower) listRound(ctx context.Context) (map[string]map[int32]int64, error) {
	f.rounds.mu.Lock()
	if f.rounds.next == nil {
		f.rounds.next = &offsetRound{done: make(chan struct{})}
	}
	r := f.rounds.next
	r.waiters++
	if !f.rounds.running {
		f.rounds.running, f.rounds.next = true, nil
		go f.runRounds(r)
	}
	f.rounds.mu.Unlock()
	select {
	case <-r.done:
		return r.targets, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// runRounds sends r's request, then the next round's if calls arrived
// meanwhile, until none did. A round's request is bounded by the
// Follower's own timeout, not by any one caller's context.
func (f *Follower) runRounds(r *offsetRound) {
	for r != nil {
		ctx, cancel := context.WithTimeout(context.Background(), f.syncTimeout)
		r.targets, r.err = f.lastStableAll(ctx)
		cancel()
		close(r.done)
		f.rounds.mu.Lock()
		r, f.rounds.next = f.rounds.next, nil
		f.rounds.running = r != nil
		f.rounds.mu.Unlock()
	}
}

// lastStableAll is lastStable for every topic in one request (sharded to
// the leaders by kgo); a topic it does not fully answer is listed again
// alone, through lastStable and its fallback.
func (f *Follower) lastStableAll(ctx context.Context) (map[string]map[int32]int64, error) {
	out := map[string]map[int32]int64{}
	want := map[string]int{}
	req := newEndsRequest()
	for _, t := range f.topics {
		parts, err := f.partitions(ctx, t)
		if err != nil {
			continue // listed alone below
		}
		req.Topics = append(req.Topics, endsOf(t, parts))
		want[t] = len(parts)
	}
	seen := map[string]int{}
	if len(req.Topics) > 0 {
		for _, sh := range f.wcl.RequestSharded(ctx, req) {
			if sh.Err != nil {
				clear(seen)
				break
			}
			for _, rt := range sh.Resp.(*kmsg.ListOffsetsResponse).Topics {
				for _, p := range rt.Partitions {
					if kerr.ErrorForCode(p.ErrorCode) != nil {
						continue
					}
					if out[rt.Topic] == nil {
						out[rt.Topic] = map[int32]int64{}
					}
					seen[rt.Topic]++
					if p.Offset > 0 {
						out[rt.Topic][p.Partition] = p.Offset
					}
				}
			}
		}
	}
	for _, t := range f.topics {
		if n, ok := want[t]; ok && seen[t] == n {
			continue
		}
		targets, err := f.lastStable(ctx, t)
		if err != nil {
			return nil, err
		}
		out[t] = targets
	}
	return out, nil
}
