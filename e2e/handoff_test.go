package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/services/dispatcher/dispatcher"
)

// TestARevokeThatFollowsAnEmptyOneWaitsForTheLoop (I44, the hand-off's
// blind spot): in a cooperative rebalance franz-go first ends the
// session with a revoke of nothing, which the loop allows at once
// (AllowRebalance zeroes the client's count of polls), and, once the
// member has joined again, revokes the partitions the SyncGroup moved
// away. That second revoke must wait for the loop — whose drain and
// commit keep what the moving partitions completed from being POSTed
// again — however late the loop's next poll comes. Here the first
// dispatcher's loop is held, right after it allowed the empty revoke,
// until its revoke of the moved partitions ran (or 3 s passed) while a
// second dispatcher joins under load. Before the fix the revoke ran
// during the hold without the loop, and the joining dispatcher POSTed
// again what the moved partitions had completed and not yet committed.
func TestARevokeThatFollowsAnEmptyOneWaitsForTheLoop(t *testing.T) {
	var armed, revokedInHold atomic.Bool
	var holds atomic.Int32
	revoked := make(chan struct{}, 1)
	hold := func() {
		if !armed.CompareAndSwap(true, false) {
			return
		}
		holds.Add(1)
		select {
		case <-revoked:
			revokedInHold.Store(true)
		case <-time.After(3 * time.Second):
		}
	}
	st := startStack(t, func(c *stackConfig) {
		// Completed work waits a second for its commit: a revoke that
		// does not wait for the loop drops some of it.
		c.dispatcher.CommitInterval = time.Second
		c.dispatcherOpts = append(c.dispatcherOpts, dispatcher.WithLogger(slog.New(allowHold{
			Handler: testLogger(t, "dispatcher").Handler(), hold: hold, revoked: func() { notify(revoked) }})))
	})
	rx := newDrainReceiver()
	srv := httptest.NewServer(rx)
	defer srv.Close()
	const endpoints = 4
	for i := range endpoints {
		st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: fmt.Sprint(srv.URL, "/healthy/", i), EventTypes: []string{"a.*"}, OutageModeDisabled: true})
	}

	load := startSteadyLoad(st, 10*time.Millisecond, func(i int) error {
		body, _ := json.Marshal(laneEvent{Lane: "k", I: i})
		_, err := st.events().PublishEvent(st.ctx(), &hooklinev1.PublishEventRequest{EventType: "a.b", Payload: body})
		return err
	})
	more := load.more
	more(100)

	t.Log("dispatcher 2 joins; dispatcher 1's loop is held after it allows its empty revoke")
	peer := &vservice{}
	defer peer.halt()
	armed.Store(true)
	rx.enter("join")
	peer.start(st, st.newPeer(2, 15*time.Second, dispatcher.WithLogger(testLogger(t, "dispatcher-2"))).Run)
	st.waitSharedBy(2, time.Now().Add(waitFor))
	rx.enter("load")
	more(100)
	deliveries := load.end() * endpoints
	st.until(fmt.Sprintf("%d deliveries answered 2xx", deliveries), func() bool {
		ok, _ := rx.delivered()
		return ok == deliveries
	})
	st.terminalResults(deliveries)
	_, dups := rx.delivered()
	some, _ := rx.report(10)
	t.Logf("%d deliveries, %d duplicates; the loop was held %d time(s), the revoke ran during the hold: %v", deliveries, dups, holds.Load(), revokedInHold.Load())
	if holds.Load() != 1 {
		t.Fatalf("dispatcher 1 allowed no empty revoke while dispatcher 2 joined (holds %d): the test did not reach its case", holds.Load())
	}
	if revokedInHold.Load() {
		t.Errorf("the revoke of the moved partitions ran while dispatcher 1's loop was held after the empty revoke: it did not wait for the loop")
	}
	if dups != 0 {
		t.Errorf("%d duplicate POSTs of %d deliveries at a join, want 0; e.g. %s", dups, deliveries, strings.Join(some, ", "))
	}
}

// loopAllowed is the loop's debug line once it allowed a partition
// callback (yield.go), with the partitions it revokes.
const loopAllowed = "a partition callback is allowed"

// allowHold holds the logging goroutine in hold when a dispatcher's loop
// logs that it allowed a partition callback that revokes nothing, and
// calls revoked when a revoke of delivery partitions is logged.
type allowHold struct {
	slog.Handler
	hold, revoked func()
}

func (h allowHold) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	switch r.Message {
	case loopAllowed:
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "revokes" && a.Value.Int64() == 0 {
				h.hold()
			}
			return true
		})
	case "partitions revoked":
		h.revoked()
	}
	return err
}

func (h allowHold) WithAttrs(as []slog.Attr) slog.Handler {
	return allowHold{h.Handler.WithAttrs(as), h.hold, h.revoked}
}

func (h allowHold) WithGroup(name string) slog.Handler {
	return allowHold{h.Handler.WithGroup(name), h.hold, h.revoked}
}

// steadyLoad publishes one event every period (publish(i) for the i-th)
// until end, or until the stack fails; a publish error fails the test and
// ends the load.
type steadyLoad struct {
	st        *stack
	published atomic.Int64
	stop      chan struct{}
	done      chan struct{}
}

func startSteadyLoad(st *stack, period time.Duration, publish func(i int) error) *steadyLoad {
	l := &steadyLoad{st: st, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			case <-st.failed.Done():
				return
			case <-tick.C:
			}
			if err := publish(i); err != nil {
				st.t.Errorf("publish %d: %v", i, err)
				return
			}
			l.published.Add(1)
		}
	}()
	return l
}

// more waits until the load has published n more events.
func (l *steadyLoad) more(n int64) {
	l.st.t.Helper()
	target := l.published.Load() + n
	l.st.until(fmt.Sprintf("%d events published", target), func() bool { return l.published.Load() >= target })
}

// end stops the load and returns how many events it published.
func (l *steadyLoad) end() int {
	close(l.stop)
	<-l.done
	return int(l.published.Load())
}
