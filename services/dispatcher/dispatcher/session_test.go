package dispatcher

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/sdk/sign"
)

// TestALoopEndedByAFailedSessionReturnsOnlyOnceItsGoroutinesHave (I40):
// a commit's end fails with its outcome unknown while attempts are in
// flight, and the failure comes in one batch with an attempt's end. The
// loop ends (collect returns the failure, accounting for the rest of the
// batch), and end returns only once every attempt it started has
// reported, cancelled: none of them runs on into the next session,
// which begins from a fresh state.
func TestALoopEndedByAFailedSessionReturnsOnlyOnceItsGoroutinesHave(t *testing.T) {
	var served atomic.Int32
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if served.Add(1) == 1 {
			w.WriteHeader(http.StatusOK) // the first attempt ends at once
			return
		}
		<-r.Context().Done() // the others until the dispatcher gives up on them
	}))
	defer rx.Close()
	s := newTestService(t)
	ep := endpoint(rx.URL, sign.GenerateSecret())
	ep.Endpoint.MaxInFlight = 3
	s.store.Put(ep)
	e := testEngine(t, s)
	e.pollN(t, 0, 0, 3)

	// The commit's goroutine reports its end failed, unconfirmed.
	e.outstanding++
	e.in.post(msg{kind: msgCommitted, err: fmt.Errorf("end transaction: %w", hkafka.ErrUnconfirmed)})
	e.pump(s.now())
	if l := e.f.lanes["ep_1"]; l.inFlight != 3 {
		t.Fatalf("%d attempts in flight, want 3", l.inFlight)
	}
	deadline := time.After(10 * time.Second)
	for pending(e.in) < 2 { // the failure, then the first attempt's end
		select {
		case <-e.in.signal:
		case <-deadline:
			t.Fatal("the first attempt did not report")
		}
	}
	if err := e.collect(s.now()); !errors.Is(err, hkafka.ErrUnconfirmed) {
		t.Fatalf("collect returned %v, want the unconfirmed end", err)
	}
	if e.outstanding != 2 {
		t.Fatalf("%d goroutines counted out after the failed commit and the first attempt's end, want the 2 attempts still in flight", e.outstanding)
	}

	ended := make(chan struct{})
	go func() {
		defer close(ended)
		e.end()
	}()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatalf("the loop's end did not return: %d goroutines out", e.outstanding)
	}
	if e.outstanding != 0 {
		t.Fatalf("the loop ended with %d goroutines out", e.outstanding)
	}
	if n := pending(e.in); n != 0 {
		t.Fatalf("%d messages posted after the loop ended", n)
	}
}

// pending is how many messages wait in b.
func pending(b *inbox) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.msgs)
}
