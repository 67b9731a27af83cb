package ingest

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// fakeBroker acknowledges produced records from its own goroutine, in
// batches (everything produced since its last batch, as a Kafka
// producer's batches), and tracks the bytes produced and not yet
// acknowledged.
type fakeBroker struct {
	in   chan func()
	mu   sync.Mutex
	held int
	peak int
	n    int
	fail error
}

func newFakeBroker(tb testing.TB) *fakeBroker {
	b := &fakeBroker{in: make(chan func(), 1<<16)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ack := range b.in {
			batch := []func(){ack}
		drain:
			for {
				select {
				case a, ok := <-b.in:
					if !ok {
						break drain
					}
					batch = append(batch, a)
				default:
					break drain
				}
			}
			for _, a := range batch {
				a()
			}
		}
	}()
	tb.Cleanup(func() { close(b.in); <-done })
	return b
}

func (b *fakeBroker) produce(_ context.Context, r *kgo.Record, promise func(*kgo.Record, error)) {
	size := len(r.Key) + len(r.Value)
	b.mu.Lock()
	b.held += size
	b.peak = max(b.peak, b.held)
	b.n++
	fail := b.fail
	b.mu.Unlock()
	b.in <- func() {
		b.mu.Lock()
		b.held -= size
		b.mu.Unlock()
		promise(r, fail)
	}
}

func record(payload []byte) func(int) (*kgo.Record, error) {
	return func(int) (*kgo.Record, error) {
		return &kgo.Record{Key: []byte("ep_1"), Value: bytes.Clone(payload)}, nil
	}
}

// A fan-out never holds more than its window of encoded records that
// Kafka has not acknowledged (or one record, when one is larger): a
// publish to N endpoints does not hold N copies of its payload.
func TestFanOutHoldsAtMostAWindowOfRecords(t *testing.T) {
	payload := bytes.Repeat([]byte("x"), 100<<10)
	const window, n = 350 << 10, 64
	b := newFakeBroker(t)
	if err := produceWindowed(t.Context(), b.produce, window, n, record(payload)); err != nil {
		t.Fatal(err)
	}
	if b.n != n || b.peak > window {
		t.Fatalf("produced %d records (want %d), at most %d bytes unacknowledged (window %d)", b.n, n, b.peak, window)
	}

	big := newFakeBroker(t)
	if err := produceWindowed(t.Context(), big.produce, 10<<10, 5, record(payload)); err != nil {
		t.Fatal(err)
	}
	if big.n != 5 || big.peak > len(payload)+4 {
		t.Fatalf("records larger than the window: %d produced, %d bytes held at once, want one record at a time", big.n, big.peak)
	}

	failing := newFakeBroker(t)
	failing.fail = errors.New("broker says no")
	if err := produceWindowed(t.Context(), failing.produce, 150<<10, n, record(payload)); err == nil || err.Error() != "broker says no" {
		t.Fatalf("a failed produce: got %v", err)
	}
	if failing.n >= n {
		t.Fatalf("kept producing all %d records after a failure", failing.n)
	}

	bad := errors.New("cannot encode")
	err := produceWindowed(t.Context(), newFakeBroker(t).produce, window, n, func(int) (*kgo.Record, error) { return nil, bad })
	var enc errEncode
	if !errors.As(err, &enc) || !errors.Is(enc.error, bad) {
		t.Fatalf("an encode failure: got %v", err)
	}
}

// BenchmarkFanOut publishes a 256 KiB payload to 256 endpoints (64 MiB
// of records, the default --max-fanout-bytes): "windowed" is
// produceWindowed, "all-at-once" encodes every record before producing
// (how publishes were written before). peak-MiB is the most encoded
// record bytes held unacknowledged at once.
//
//	go test -run '^$' -bench BenchmarkFanOut -benchmem ./ingest/
func BenchmarkFanOut(b *testing.B) {
	payload := bytes.Repeat([]byte("x"), 256<<10)
	const n = 256
	b.Run("windowed", func(b *testing.B) {
		b.ReportAllocs()
		br := newFakeBroker(b)
		for b.Loop() {
			if err := produceWindowed(b.Context(), br.produce, fanOutWindow, n, record(payload)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(br.peak)/(1<<20), "peak-MiB")
	})
	b.Run("all-at-once", func(b *testing.B) {
		b.ReportAllocs()
		br := newFakeBroker(b)
		for b.Loop() {
			recs := make([]*kgo.Record, n)
			for i := range recs {
				recs[i], _ = record(payload)(i)
			}
			var wg sync.WaitGroup
			wg.Add(n)
			for _, r := range recs {
				br.produce(b.Context(), r, func(*kgo.Record, error) { wg.Done() })
			}
			wg.Wait()
		}
		b.ReportMetric(float64(br.peak)/(1<<20), "peak-MiB")
	})
}

// Admission charges a publish what it holds: the payload, and its
// records up to the fan-out window, not one copy per endpoint.
func TestAdmissionChargesAFanOutAtMostItsWindow(t *testing.T) {
	tests := []struct {
		payload, endpoints int
		want               int64
	}{
		{100, 3, 100 + 300 + callOverhead},
		{256 << 10, 256, 256<<10 + fanOutWindow + callOverhead},
		{8 << 20, 2, 8<<20 + 8<<20 + callOverhead}, // one record larger than the window
		{1000, 0, 1000 + callOverhead},
	}
	for _, tt := range tests {
		if got := cost(tt.payload, tt.endpoints); got != tt.want {
			t.Errorf("cost(%d, %d) = %d, want %d", tt.payload, tt.endpoints, got, tt.want)
		}
	}
}
