package kafka

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// freezer holds every byte its connections read while frozen, as a broker
// that takes requests but answers none would.
type freezer struct {
	mu     sync.Mutex
	thawed chan struct{} // closed while not frozen
}

func newFreezer() *freezer {
	f := &freezer{thawed: make(chan struct{})}
	close(f.thawed)
	return f
}

func (f *freezer) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.thawed:
		f.thawed = make(chan struct{})
	default:
	}
}

func (f *freezer) thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.thawed:
	default:
		close(f.thawed)
	}
}

func (f *freezer) wait() {
	f.mu.Lock()
	c := f.thawed
	f.mu.Unlock()
	<-c
}

func (f *freezer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	return &frozenConn{Conn: c, f: f}, nil
}

type frozenConn struct {
	net.Conn
	f *freezer
}

func (c *frozenConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.f.wait()
	return n, err
}

// TestProduceAckedAnswersAtTheDeadlineWhileTheBrokerIsFrozen: a produce
// already on the wire when the broker stops answering is not cancelled by
// its context (kgo's ProduceSync waits it out); ProduceAcked answers at
// the deadline, and the record may still be written after.
func TestProduceAckedAnswersAtTheDeadlineWhileTheBrokerIsFrozen(t *testing.T) {
	cfg, _ := testBroker(t)
	adm := kadm.NewClient(testClient(t, cfg))
	topic := newTopic(t, adm, nil)
	fr := newFreezer()
	defer fr.thaw()
	cl := testClient(t, cfg, kgo.Dialer(fr.dial), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err := ProduceAcked(t.Context(), cl, &kgo.Record{Topic: topic, Value: []byte("warm")}); err != nil {
		t.Fatal(err) // connections and producer id are set up
	}

	fr.freeze()
	const timeout = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	answered := make(chan error, 1)
	go func() { answered <- ProduceAcked(ctx, cl, &kgo.Record{Topic: topic, Value: []byte("frozen")}) }()
	bound := time.NewTimer(timeout + 5*time.Second)
	defer bound.Stop()
	select {
	case err := <-answered:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want context.DeadlineExceeded", err)
		}
	case <-bound.C:
		t.Fatal("ProduceAcked did not answer at its deadline while the broker was frozen")
	}

	// The record was on the wire: once the broker answers, it is there.
	fr.thaw()
	waitOffsets(t, adm, topic, func(_, _, end int64) bool { return end == 2 }, "the frozen record written after all")
}
