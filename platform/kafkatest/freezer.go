// Package kafkatest holds test helpers for code that talks to Kafka.
package kafkatest

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
)

// Freezer makes Kafka stop answering, as a frozen broker does: requests
// still reach it (a produce may be written), but no answer comes back
// until Thaw. Pass Dial as the client's dialer (kgo.Dialer). Safe for
// concurrent use.
type Freezer struct {
	produceOnly bool
	mu          sync.Mutex
	thawed      chan struct{} // closed while not frozen
}

// NewFreezer returns a thawed Freezer. With produceOnly, only connections
// that have carried a Produce request are frozen, so a freeze hits a
// write already in flight while metadata and fetches go on.
func NewFreezer(produceOnly bool) *Freezer {
	f := &Freezer{produceOnly: produceOnly, thawed: make(chan struct{})}
	close(f.thawed)
	return f
}

// Freeze stops every answer from now on (a no-op when frozen).
func (f *Freezer) Freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.thawed:
		f.thawed = make(chan struct{})
	default:
	}
}

// Thaw lets the held answers through (a no-op when not frozen).
func (f *Freezer) Thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.thawed:
	default:
		close(f.thawed)
	}
}

func (f *Freezer) wait() {
	f.mu.Lock()
	c := f.thawed
	f.mu.Unlock()
	<-c
}

// Dial connects like a net.Dialer; the connection it returns is frozen
// whenever the Freezer is.
func (f *Freezer) Dial(ctx context.Context, network, host string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	return &frozenConn{Conn: c, f: f}, nil
}

type frozenConn struct {
	net.Conn
	f       *Freezer
	produce atomic.Bool // has carried a Produce request
}

// Write notes whether the connection carries Produce requests (kgo
// writes one whole request per Write: size, then api key 0).
func (c *frozenConn) Write(b []byte) (int, error) {
	if len(b) >= 6 && binary.BigEndian.Uint16(b[4:6]) == 0 {
		c.produce.Store(true)
	}
	return c.Conn.Write(b)
}

// Read hands over nothing while frozen.
func (c *frozenConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if !c.f.produceOnly || c.produce.Load() {
		c.f.wait()
	}
	return n, err
}
