package dispatcher

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hookline/hookline/sdk/sign"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
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

// TestTheWindowGaugesReportTheLoopsLastMemoryReport: the window's
// deliveries, bytes and partitions paused for their share are metrics
// (what an operator reads when slow receivers fill the window).
func TestTheWindowGaugesReportTheLoopsLastMemoryReport(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	s := newTestService(t, WithTelemetry(tracenoop.NewTracerProvider(), mp))
	s.mem.last.Store(&Memory{WindowRecords: 7, WindowBytes: 7 << 10, FetchPaused: 2, At: time.Now()})
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"hookline.dispatcher.window.deliveries": 7, "hookline.dispatcher.window.bytes": 7 << 10, "hookline.dispatcher.window.fetch_paused": 2}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			w, ok := want[m.Name]
			if !ok {
				continue
			}
			g, ok := m.Data.(metricdata.Gauge[int64])
			if !ok || len(g.DataPoints) != 1 || g.DataPoints[0].Value != w {
				t.Fatalf("%s: %+v, want one point of %d", m.Name, m.Data, w)
			}
			delete(want, m.Name)
		}
	}
	if len(want) > 0 {
		t.Fatalf("not reported: %v", want)
	}
}
