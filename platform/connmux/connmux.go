// Package connmux serves gRPC and HTTP/1.1 on one port by looking at the
// first bytes of each connection: one that opens with the HTTP/2 client
// preface goes to the gRPC listener, every other to the HTTP listener.
// The choice is made once per connection, so grpc.Server.Serve keeps its
// own transport (no grpc.Server.ServeHTTP on the hot path) and a
// long-lived gRPC connection pays nothing after its first bytes.
//
// JSON over HTTP/2 is not told apart from gRPC: HTTP clients reach the
// HTTP side over HTTP/1.1 (curl and net/http do over plain TCP; behind
// TLS, ALPN must give them http/1.1, see ALPN).
package connmux

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"time"
)

// preface opens every HTTP/2 connection (RFC 9113 §3.4); gRPC is HTTP/2.
const preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// Mux splits one listener in two. It is safe for concurrent use.
type Mux struct {
	root    net.Listener
	timeout time.Duration
	grpc    *child
	http    *child

	closeOnce sync.Once
	done      chan struct{}
	err       error // why Serve stopped; read after done is closed
	sniffs    sync.WaitGroup
}

// New returns a Mux over ln. A connection that has not sent enough bytes
// to be classified within sniffTimeout is closed.
func New(ln net.Listener, sniffTimeout time.Duration) *Mux {
	m := &Mux{root: ln, timeout: sniffTimeout, done: make(chan struct{})}
	m.grpc = &child{m: m, conns: make(chan net.Conn)}
	m.http = &child{m: m, conns: make(chan net.Conn)}
	return m
}

// GRPC returns the listener of HTTP/2 (gRPC) connections.
func (m *Mux) GRPC() net.Listener { return m.grpc }

// HTTP returns the listener of every other connection.
func (m *Mux) HTTP() net.Listener { return m.http }

// Serve accepts connections until the root listener is closed (Close)
// and returns the error that stopped it; net.ErrClosed after Close.
func (m *Mux) Serve() error {
	defer m.sniffs.Wait()
	for {
		c, err := m.root.Accept()
		if err != nil {
			m.stop(err)
			return err
		}
		m.sniffs.Go(func() { m.route(c) })
	}
}

// Close closes the root listener; both children then return
// net.ErrClosed from Accept.
func (m *Mux) Close() error {
	err := m.root.Close()
	m.stop(net.ErrClosed)
	return err
}

func (m *Mux) stop(err error) {
	m.closeOnce.Do(func() { m.err = err; close(m.done) })
}

// route classifies c and hands it to the listener it belongs to.
func (m *Mux) route(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(m.timeout))
	br := bufio.NewReaderSize(c, len(preface))
	isH2, err := sniff(br)
	if err != nil {
		_ = c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	dst := m.http
	if isH2 {
		dst = m.grpc
	}
	select {
	case dst.conns <- &conn{Conn: c, r: br}:
	case <-m.done:
		_ = c.Close()
	}
}

// sniff reads until the bytes seen either are the whole HTTP/2 preface
// or stop being a prefix of it. Nothing is consumed from br.
func sniff(br *bufio.Reader) (bool, error) {
	for n := 1; ; n++ {
		b, err := br.Peek(n)
		if !bytes.HasPrefix([]byte(preface), b) {
			return false, nil
		}
		if len(b) == len(preface) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
	}
}

// conn replays the sniffed bytes before reading on.
type conn struct {
	net.Conn
	r io.Reader
}

func (c *conn) Read(p []byte) (int, error) { return c.r.Read(p) }

// child is one side of the split.
type child struct {
	m     *Mux
	conns chan net.Conn
}

func (l *child) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.m.done:
		if errors.Is(l.m.err, net.ErrClosed) {
			return nil, net.ErrClosed
		}
		return nil, l.m.err
	}
}

// Close closes the whole Mux: the two sides share one port.
func (l *child) Close() error { return l.m.Close() }

func (l *child) Addr() net.Addr { return l.m.root.Addr() }

// ALPN returns a copy of cfg for a TLS listener in front of a Mux: a
// client that offers only "h2" (every gRPC client) gets h2, one that also
// offers "http/1.1" (curl, browsers, most HTTP libraries) gets http/1.1
// and so reaches the HTTP side. cfg's own GetConfigForClient, if set,
// still chooses the rest of the configuration.
func ALPN(cfg *tls.Config) *tls.Config {
	out := cfg.Clone()
	out.NextProtos = []string{"h2", "http/1.1"}
	out.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		base := cfg
		if cfg.GetConfigForClient != nil {
			b, err := cfg.GetConfigForClient(hello)
			if err != nil {
				return nil, err
			}
			if b != nil {
				base = b
			}
		}
		c := base.Clone()
		c.GetConfigForClient = nil
		c.NextProtos = []string{"h2"}
		if slices.Contains(hello.SupportedProtos, "http/1.1") {
			c.NextProtos = []string{"http/1.1"}
		}
		return c, nil
	}
	return out
}
