// Package supervise runs the long-lived parts of a process (servers,
// Kafka loops, followers, telemetry endpoints) in a declared order and
// stops them in the reverse order: the part started first is stopped
// last, after every part that may depend on it has returned.
//
// A part runs until its context ends, and then returns nil or the error
// of its own shutdown. A part that returns while its context is live
// (an error, or nil: a server that stopped serving by itself) stops the
// process: every part is then stopped in the reverse order, and the
// group returns what the first one said. So a process never runs on
// with one of its parts gone, and a part never outlives what it reads
// from.
//
// It is the one supervisor of every binary and of hookline dev
// (golang.org/x/sync/errgroup cancels every goroutine at once, with no
// order: a dispatcher's drain would race the views it reads and the
// telemetry it reports to).
package supervise

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Part is one long-lived part of a process.
type Part struct {
	// Name prefixes the part's errors, unless they already start with
	// it ("ingest: listen: …"), and names a part that returned by itself.
	Name string
	// Run runs the part until ctx ends. ctx carries the values of the
	// group's context, not its cancellation: the group ends it in order.
	Run func(ctx context.Context) error
}

// Run starts parts in the order given and runs them until ctx ends or
// one of them returns by itself, then stops them one at a time from the
// last to the first (Group.Wait).
func Run(ctx context.Context, parts ...Part) error {
	g := New(ctx)
	for _, p := range parts {
		g.Go(p)
	}
	return g.Wait()
}

// A Group is parts started one after another, between which a process
// may do work of its own (read a view, join a group) under the group's
// Context. Its methods are safe for concurrent use, but Go must not be
// called once Wait has begun.
type Group struct {
	ctx  context.Context
	stop context.CancelCauseFunc

	mu      sync.Mutex
	first   error // what stopped the group, if not its context
	running []*running
}

type running struct {
	part   Part
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// New returns an empty group that stops when ctx ends.
func New(ctx context.Context) *Group {
	gctx, stop := context.WithCancelCause(ctx)
	return &Group{ctx: gctx, stop: stop}
}

// Context ends when the group stops: its parent ended, a part returned
// by itself, or Stop was called. Work a process does between starting
// parts runs under it.
func (g *Group) Context() context.Context { return g.ctx }

// Go starts p now.
func (g *Group) Go(p Part) {
	pctx, cancel := context.WithCancel(context.WithoutCancel(g.ctx))
	r := &running{part: p, cancel: cancel, done: make(chan struct{})}
	g.mu.Lock()
	g.running = append(g.running, r)
	g.mu.Unlock()
	go func() {
		defer close(r.done)
		err := p.Run(pctx)
		if pctx.Err() != nil {
			r.err = named(p.Name, err) // stopped in order
			return
		}
		err = named(p.Name, err)
		if err == nil {
			err = fmt.Errorf("%s stopped by itself", cmp.Or(p.Name, "a part"))
		}
		if !g.fail(err) {
			r.err = err // the group was stopping already: reported in order
		}
	}()
}

// Stop stops the group with err (the first error it returns), as a part
// failing does: for a failure seen outside any part, a watcher's
// callback or a step between starts.
func (g *Group) Stop(err error) { g.fail(err) }

// fail stops the group with err and reports whether err is the first.
func (g *Group) fail(err error) bool {
	g.mu.Lock()
	first := g.first == nil && g.ctx.Err() == nil
	if first {
		g.first = err
	}
	g.mu.Unlock()
	g.stop(err)
	return first
}

// Wait waits until the group stops, then stops its parts one at a time
// from the last started to the first, each once the parts after it
// have returned. It returns nil when the group's context ended and every
// part returned nil; otherwise the errors, the one that stopped the
// group first.
func (g *Group) Wait() error {
	<-g.ctx.Done()
	g.mu.Lock()
	errs := []error{g.first}
	rs := g.running
	g.mu.Unlock()
	for i := len(rs) - 1; i >= 0; i-- {
		rs[i].cancel()
		<-rs[i].done
		errs = append(errs, rs[i].err)
	}
	return errors.Join(errs...)
}

// named prefixes err with name, if both are set and err does not start
// with it already.
func named(name string, err error) error {
	if err == nil || name == "" || strings.HasPrefix(err.Error(), name+": ") {
		return err
	}
	return fmt.Errorf("%s: %w", name, err)
}
