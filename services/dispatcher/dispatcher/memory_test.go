package dispatcher

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hookline/hookline/sdk/sign"
)

// The memory report is what the fault simulation checks its bounds on:
// it must say what the window holds against its budget, and the answers
// kept.
func TestTheMemoryReportSaysWhatTheWindowAndTheAnswersHold(t *testing.T) {
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer rx.Close()
	s := newTestService(t)
	s.store.Put(endpoint(rx.URL, sign.GenerateSecret()))
	e := testEngine(t, s)
	if m := s.Memory(); !m.At.IsZero() || m.WindowRecords != 0 {
		t.Fatalf("before the loop's first report: %+v", m)
	}
	e.pollN(t, 0, 0, 5)
	for i := range 3 {
		e.pollID(t, 1, int64(i), fmt.Sprint("dlv_p1_", i)) // not copies of partition 0's
	}
	now := s.now()
	e.reportMemory(now)
	m := s.Memory()
	if m.WindowRecords != 8 || m.WindowMaxRecords != s.cfg.WindowRecords || m.Partitions != 2 || m.WindowBytes <= 0 || m.PollRecords != s.cfg.BatchSize {
		t.Fatalf("after 8 deliveries on 2 partitions: %+v", m)
	}
	e.pump(now)
	e.waitOutstanding(t, 0)
	// Reports are at most memoryEvery apart: one sooner is not made.
	e.reportMemory(now.Add(memoryEvery / 2))
	if got := s.Memory(); !got.At.Equal(now) {
		t.Fatalf("a report %v after the last was made", memoryEvery/2)
	}
	e.reportMemory(now.Add(memoryEvery))
	m = s.Memory()
	if m.Answers != 8 || m.AnswerBytes <= 0 || m.AnswerMaxBytes != answeredBytes || m.Resolving != 0 {
		t.Fatalf("after 8 deliveries answered 2xx and not committed: %+v", m)
	}
	if !m.At.Equal(now.Add(memoryEvery)) {
		t.Fatalf("report at %v, want %v", m.At, now.Add(memoryEvery))
	}
}
