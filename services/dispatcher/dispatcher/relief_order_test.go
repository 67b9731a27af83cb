package dispatcher

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/hookline/hookline/sdk/sign"
)

// A full window is a reason to spill what waits, not what the loop is
// about to start: deliveries just polled into a window that is now full,
// to an endpoint with room, are attempted in the loop's turn, not spilled
// round the retry path by the relief that runs in the same turn (make sim
// seed 9, with a window of 12, drained 164 deliveries through 32 spills).
func TestAFullWindowDoesNotSpillWhatCanStartNow(t *testing.T) {
	var requests atomic.Int32
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rx.Close()
	s := newTestService(t)
	s.cfg.WindowRecords = 4
	s.store.Put(endpoint(rx.URL, sign.GenerateSecret()))
	e := testEngine(t, s)
	e.pollN(t, 0, 0, 4)
	if !e.w.full() {
		t.Fatal("the window is not full after 4 deliveries with a budget of 4")
	}
	now := s.now()
	e.turn(now) // the loop's turn after a poll
	e.waitOutstanding(t, 0)
	if n := requests.Load(); n != 4 {
		pw := e.w.parts[tp{s.topics.Deliveries, 0}]
		outs, _, _ := e.w.popDone(pw, now, nil)
		t.Fatalf("the receiver got %d of 4 deliveries its endpoint had room for; %d records written (spilled: the retry path)", n, len(outs))
	}
}
