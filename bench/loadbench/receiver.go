package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookline/hookline/sdk/batch"
)

// answer is how a receiver path responds.
type answer int

const (
	answerOK        answer = iota // 204 at once
	answerSlow                    // 204 after route.delay
	answerHang                    // never answers; returns when the caller gives up
	answerFailUntil               // 503 until receiver.recoverAt, then 204
)

// route is what one receiver path does and the group its arrivals count in.
type route struct {
	group string
	kind  answer
	delay time.Duration
	// failIf, when set, makes a request whose body contains it answer
	// 400, a permanent failure (counted as failed), whatever kind says.
	failIf []byte
}

// arrival is the first 2xx answer to one (webhook-id, path).
type arrival struct {
	group string
	at    time.Time
}

// receiver is the HTTP server on 127.0.0.1 that stands in for every
// webhook receiver of a scenario. It counts 2xx answers per group,
// remembers the first arrival of each (webhook-id, path), and lets one
// waiter at a time wait for a count. Safe for concurrent use.
type receiver struct {
	srv       *http.Server
	url       string
	quit      chan struct{} // closed by close: hanging handlers return
	changed   chan struct{} // size one: poked on every 2xx
	recoverAt atomic.Int64  // unix nanoseconds; answerFailUntil fails before it

	mu       sync.Mutex
	onUnique func(group string) // called for each distinct delivery, outside mu
	routes   map[string]route
	first    map[string]arrival // key: webhook-id + " " + path
	answers  map[string]int64   // 2xx answers per group, duplicates included
	unique   map[string]int64   // distinct deliveries per group
	failed   map[string]int64   // non-2xx answers per group
	tries    map[string]int64   // requests per group, answered or not
	posts    map[string]int64   // requests per group answered 2xx (a batch is one)
}

// newReceiver listens on a free loopback port and serves until close.
func newReceiver() (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{
		url: "http://" + ln.Addr().String(), quit: make(chan struct{}), changed: make(chan struct{}, 1),
		routes: map[string]route{}, first: map[string]arrival{},
		answers: map[string]int64{}, unique: map[string]int64{}, failed: map[string]int64{}, tries: map[string]int64{}, posts: map[string]int64{},
	}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }() // returns ErrServerClosed on close
	return r, nil
}

// handle registers path (e.g. "/ep/3") and returns its URL.
func (r *receiver) handle(path string, rt route) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.routes[path] = rt
	return r.url + path
}

// notify makes fn be called once per distinct delivery from now on.
func (r *receiver) notify(fn func(group string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onUnique = fn
}

// close stops the server and releases hanging handlers.
func (r *receiver) close() {
	close(r.quit)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.srv.Shutdown(ctx)
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	rt, ok := r.routes[req.URL.Path]
	if ok {
		r.tries[rt.group]++
	}
	r.mu.Unlock()
	if rt.failIf != nil {
		body, _ := io.ReadAll(req.Body)
		if bytes.Contains(body, rt.failIf) {
			r.count(rt.group, "", "", false)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
	}
	var members []string // a batch's member ids (issue 30): each counts as a delivery
	if req.Header.Get(batch.HeaderSize) != "" {
		body, _ := io.ReadAll(req.Body)
		ms, err := batch.Decode(body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		for _, m := range ms {
			members = append(members, m.ID)
		}
	}
	_, _ = io.Copy(io.Discard, req.Body)
	if !ok || req.Method != http.MethodPost {
		http.NotFound(w, req)
		return
	}
	switch rt.kind {
	case answerSlow:
		t := time.NewTimer(rt.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-req.Context().Done():
			return
		case <-r.quit:
			return
		}
	case answerHang:
		select {
		case <-req.Context().Done():
		case <-r.quit:
		}
		return
	case answerFailUntil:
		if time.Now().UnixNano() < r.recoverAt.Load() {
			r.count(rt.group, "", "", false)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
	}
	if members != nil {
		for _, id := range members {
			r.count(rt.group, id, req.URL.Path, true)
		}
		r.mu.Lock()
		r.posts[rt.group]++
		r.mu.Unlock()
	} else {
		r.count(rt.group, req.Header.Get("webhook-id"), req.URL.Path, true)
		r.mu.Lock()
		r.posts[rt.group]++
		r.mu.Unlock()
	}
	w.WriteHeader(http.StatusNoContent)
}

// count records one answer.
func (r *receiver) count(group, id, path string, ok bool) {
	now := time.Now()
	r.mu.Lock()
	if !ok {
		r.failed[group]++
		r.mu.Unlock()
		return
	}
	r.answers[group]++
	key := id + " " + path
	_, seen := r.first[key]
	if !seen {
		r.first[key] = arrival{group: group, at: now}
		r.unique[group]++
	}
	fn := r.onUnique
	r.mu.Unlock()
	if !seen && fn != nil {
		fn(group)
	}
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// counts returns the 2xx answers, distinct deliveries and failures of group.
func (r *receiver) counts(group string) (answers, unique, failed int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.answers[group], r.unique[group], r.failed[group]
}

// postsOf returns how many requests of group were answered 2xx: a batch
// is one, however many deliveries it carries.
func (r *receiver) postsOf(group string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.posts[group]
}

// attempts returns how many requests group has seen, answered or not.
func (r *receiver) attempts(group string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tries[group]
}

// uniqueIn counts the distinct deliveries of group that first arrived in [from, to).
func (r *receiver) uniqueIn(group string, from, to time.Time) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for _, a := range r.first {
		if a.group == group && !a.at.Before(from) && a.at.Before(to) {
			n++
		}
	}
	return n
}

// arrivals returns the first arrival time of each webhook-id of group.
func (r *receiver) arrivals(group string) map[string]time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]time.Time{}
	for k, a := range r.first {
		if a.group == group {
			id, _, _ := strings.Cut(k, " ")
			if t, ok := out[id]; !ok || a.at.Before(t) {
				out[id] = a.at
			}
		}
	}
	return out
}

// lastArrival returns when the latest distinct delivery of group arrived.
func (r *receiver) lastArrival(group string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var last time.Time
	for _, a := range r.first {
		if a.group == group && a.at.After(last) {
			last = a.at
		}
	}
	return last
}

// errTimeout says a wait for a count ran out of time.
var errTimeout = errors.New("timed out")

// waitUnique waits until group has at least n distinct deliveries, or
// until ctx ends. One waiter at a time.
func (r *receiver) waitUnique(ctx context.Context, group string, n int64) error {
	for {
		if _, u, _ := r.counts(group); u >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			_, u, _ := r.counts(group)
			return fmt.Errorf("%w: %d of %d deliveries to %s arrived", errTimeout, u, n, group)
		case <-r.changed:
		}
	}
}
