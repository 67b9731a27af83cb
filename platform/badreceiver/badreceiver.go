// Package badreceiver runs misbehaving webhook receivers on loopback:
// raw TCP servers that read an HTTP request and answer with whatever a
// broken or hostile receiver might send (endless bodies, huge bodies,
// headers trickled byte by byte, garbage, a connection cut mid-response,
// redirects to internal addresses, silence). Tests and the chaos harness
// point endpoints at them to prove each gets a classified outcome within
// the attempt timeout and nothing else stalls.
package badreceiver

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Answer writes a response (or not) on c after the request was read. It
// returns when it is done with c; the server then closes c (one request
// per connection).
type Answer func(c net.Conn)

// Server is one misbehaving receiver on 127.0.0.1.
type Server struct {
	ln    net.Listener
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	done  chan struct{}
	wg    sync.WaitGroup
}

// Listen starts a receiver that reads each request and runs answer on its
// connection (nil: close at once, after reading the request).
func Listen(answer Answer) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{ln: ln, conns: map[net.Conn]struct{}{}, done: make(chan struct{})}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns[c] = struct{}{}
			s.mu.Unlock()
			s.wg.Go(func() {
				defer func() {
					s.mu.Lock()
					delete(s.conns, c)
					s.mu.Unlock()
					c.Close()
				}()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				if answer != nil {
					answer(c)
				}
			})
		}
	})
	return s, nil
}

// Addr is the host:port the receiver listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is http://Addr/path.
func (s *Server) URL(path string) string { return "http://" + s.Addr() + path }

// Close stops accepting, closes every connection and waits for the
// answers to end.
func (s *Server) Close() {
	select {
	case <-s.done:
		return
	default:
		close(s.done)
	}
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Trickle writes s one byte every gap until s ends or c fails.
func Trickle(c net.Conn, s string, gap time.Duration) {
	for i := range len(s) {
		if _, err := c.Write([]byte{s[i]}); err != nil {
			return
		}
		time.Sleep(gap) // the receiver's own pace
	}
}

// Forever writes chunk again and again until c fails.
func Forever(c net.Conn, chunk string) {
	for {
		if _, err := io.WriteString(c, chunk); err != nil {
			return
		}
	}
}

// EndlessBody answers 200 with a body that never ends (no length, no
// chunking: it ends when the connection does), written as fast as the
// peer reads.
func EndlessBody(c net.Conn) {
	_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n")
	Forever(c, strings.Repeat("x", 4096))
}

// TrickledBody answers 503 with a chunked body trickled a byte every
// 20 ms, for far longer than any attempt timeout.
func TrickledBody(c net.Conn) {
	_, _ = io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n")
	Trickle(c, strings.Repeat("1\r\nx\r\n", 1<<20), 20*time.Millisecond)
}

// HugeBody answers 500 with a body of 10 MiB.
func HugeBody(c net.Conn) {
	const n = 10 << 20
	_, _ = fmt.Fprintf(c, "HTTP/1.1 500 Internal Server Error\r\nContent-Length: %d\r\n\r\n", n)
	_, _ = io.WriteString(c, strings.Repeat("y", n))
}

// SlowlorisHeaders sends a status line and then one header byte every
// 20 ms, never ending the headers.
func SlowlorisHeaders(c net.Conn) {
	Trickle(c, "HTTP/1.1 200 OK\r\nX-Slow: "+strings.Repeat("z", 1<<20), 20*time.Millisecond)
}

// HugeHeaders sends 1 MiB of one header at once.
func HugeHeaders(c net.Conn) {
	_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("h", 1<<20)+"\r\n\r\n")
}

// Endless1xx sends informational responses for ever, never a final one.
func Endless1xx(c net.Conn) { Forever(c, "HTTP/1.1 102 Processing\r\n\r\n") }

// Garbage answers bytes that are not HTTP, then closes.
func Garbage(c net.Conn) { _, _ = io.WriteString(c, "\x00\x16\x03garbage\r\n\r\n") }

// CloseMidHeaders closes the connection in the middle of a header.
func CloseMidHeaders(c net.Conn) { _, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Le") }

// CloseMidBody announces 100 bytes of body, sends 3, and closes.
func CloseMidBody(c net.Conn) {
	_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc")
}

// Hang reads whatever comes and never answers, until the peer gives up.
func Hang(c net.Conn) { _, _ = io.Copy(io.Discard, c) }

// Redirect answers code with Location: location (an internal address,
// typically), then closes.
func Redirect(code int, location string) Answer {
	return func(c net.Conn) {
		_, _ = fmt.Fprintf(c, "HTTP/1.1 %d Moved\r\nLocation: %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", code, location)
	}
}

// Mix is one of each misbehaviour a receiver can show over plain HTTP,
// by name.
func Mix() map[string]Answer {
	return map[string]Answer{
		"endless-body":      EndlessBody,
		"trickled-body":     TrickledBody,
		"10mb-body":         HugeBody,
		"slowloris-headers": SlowlorisHeaders,
		"huge-headers":      HugeHeaders,
		"endless-1xx":       Endless1xx,
		"garbage":           Garbage,
		"close-mid-headers": CloseMidHeaders,
		"close-mid-body":    CloseMidBody,
		"hang":              Hang,
		"redirect-internal": Redirect(http.StatusTemporaryRedirect, "http://169.254.169.254/latest/meta-data/"),
	}
}
