package dispatcher

import (
	"sync/atomic"
	"time"
)

// Memory is what a dispatcher holds in memory, against its bounds, as of
// its loop's last report (at most memoryEvery old). The fault
// simulation's checker samples it: whatever the fault schedule, the
// window stays within its budget and one poll, each partition has at
// most one resolver round out, and the answers kept stay within theirs
// (docs/DESIGN.md "Simulation"). Lanes are reported, not bounded: an
// ordered lane is held while its members wait in the window or outside
// it, and forgotten once idle.
type Memory struct {
	// WindowRecords and WindowBytes are the window's deliveries and
	// bytes; the Max fields its budget (--window-records,
	// --window-bytes), which a poll may pass by at most PollRecords.
	WindowRecords, WindowMaxRecords int
	WindowBytes, WindowMaxBytes     int64
	PollRecords                     int
	// Partitions are the partition windows held, Resolving the resolver
	// rounds out (goroutines reading the lanes or endpoints view).
	Partitions, Resolving int
	// FetchPaused are the partitions whose fetching is paused for
	// holding more than their share of the window (window.go).
	FetchPaused int
	// Lanes are the ordered lanes held in memory (one per endpoint, or
	// per endpoint and key).
	Lanes int
	// Answers are the receivers' 2xx answers kept until their
	// settlement commits (answered.go), within AnswerMaxBytes.
	Answers                     int
	AnswerBytes, AnswerMaxBytes int64
	// At is when the loop reported; zero before its first turn.
	At time.Time
}

// memoryEvery is how often the loop reports its memory.
const memoryEvery = 100 * time.Millisecond

// memoryReport holds the loop's last report. Safe for concurrent use.
type memoryReport struct {
	last atomic.Pointer[Memory]
}

// Memory returns what the dispatcher holds in memory now.
func (s *Service) Memory() Memory {
	var m Memory
	if p := s.mem.last.Load(); p != nil {
		m = *p
	}
	m.Answers, m.AnswerBytes = s.answered.size()
	m.AnswerMaxBytes = s.answered.max
	return m
}

// reportMemory publishes the window's and the lanes' sizes, at most
// every memoryEvery (loop goroutine).
func (e *engine) reportMemory(now time.Time) {
	if last := e.s.mem.last.Load(); last != nil && now.Sub(last.At) < memoryEvery && !now.Before(last.At) {
		return
	}
	records, bytes := e.w.held()
	m := &Memory{
		WindowRecords: records, WindowMaxRecords: e.w.maxRecords,
		WindowBytes: bytes, WindowMaxBytes: e.w.maxBytes,
		PollRecords: e.s.cfg.BatchSize,
		Partitions:  len(e.w.parts),
		At:          now,
	}
	for _, pw := range e.w.parts {
		if pw.res.running {
			m.Resolving++
		}
		if pw.paused {
			m.FetchPaused++
		}
	}
	for _, l := range e.f.lanes {
		if l.ord != nil {
			m.Lanes += len(l.ord.keys)
		}
	}
	e.s.mem.last.Store(m)
}
