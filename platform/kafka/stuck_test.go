package kafka

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAFollowerWhoseConsumerStopsFetchingIsMadeAgain (the chaos
// cluster-down-30s row, docs/reliability.md): a follower's consumer
// stops handing over records it could read — here every fetch of the
// first consumer hangs, while the waits' own probes (fetches of one
// byte) are answered. Sync must still end: its probe finds the record
// at the position, and the consumer is made again from there; every
// record is applied once.
func TestAFollowerWhoseConsumerStopsFetchingIsMadeAgain(t *testing.T) {
	cfg, c := testBroker(t)
	if c == nil {
		t.Skip("needs kfake's control hooks")
	}
	adm := kadm.NewClient(testClient(t, cfg))
	topic := newTopic(t, adm, nil)
	pcl := testClient(t, cfg)
	var applied atomic.Int64
	f := NewFollower(func(*kgo.Record) { applied.Add(1) }, topic)
	f.probeAfter, f.stuckAfter = 20*time.Millisecond, 300*time.Millisecond
	runFollower(t, cfg, f)
	produce(t, pcl, topic, 3, time.Now())
	ctx := t.Context()
	if err := f.Sync(ctx, topic); err != nil {
		t.Fatal(err)
	}

	// From now on the first consumer's fetches hang until it is made
	// again (or the test ends).
	freed := make(chan struct{})
	defer close(freed)
	var hung atomic.Int32
	c.ControlKey(int16(kmsg.Fetch), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if r.(*kmsg.FetchRequest).MaxBytes <= 1 || f.remakeBegun() {
			return nil, nil, false // a probe, or the consumer made again
		}
		hung.Add(1)
		c.SleepControl(func() {
			select {
			case <-freed:
			case <-time.After(time.Minute):
			}
		})
		return nil, nil, false
	})
	produce(t, pcl, topic, 2, time.Now())
	sctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	if err := f.Sync(sctx, topic); err != nil {
		t.Fatalf("Sync with the consumer's fetches hanging: %v (rebuilds %d, fetches hung %d)", err, f.Rebuilds(), hung.Load())
	}
	if f.Rebuilds() != 1 || hung.Load() == 0 {
		t.Fatalf("rebuilds %d, fetches hung %d; want 1 rebuild, after hung fetches", f.Rebuilds(), hung.Load())
	}
	if n := applied.Load(); n != 5 {
		t.Fatalf("%d records applied; want 5, each once", n)
	}
}

// remakeBegun says the Follower has decided to make its consumer again
// (or has): the new consumer starts fetching inside remake, before
// Rebuilds counts it, so the hook that hangs the first consumer's
// fetches must stop at the decision, or it hangs the new one's first
// fetch too (a second rebuild: the flake CI met at 872a649).
func (f *Follower) remakeBegun() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rebuild || f.rebuilds > 0
}
