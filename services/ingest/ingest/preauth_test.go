package ingest

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// heapInUse is the process's live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// unauthenticatedBudget is the most the heap may grow while the
// attacks below hold their connections open: far below the bodies they
// send, far above what the connections themselves cost.
const unauthenticatedBudget = 24 << 20

// TestUnauthenticatedHTTPBodiesAreNotReadIntoMemory is the first attack
// of issue 25 F2: callers without an API key open HTTP/JSON connections
// and send a publish body of nearly the limit (2 MiB), keeping the last
// byte back. The gateway read each body whole before the gRPC call whose
// interceptor checks the key, and had no read deadline, so every
// connection held its body for as long as it liked. Now the key is
// checked on the headers: each caller gets 401 before any body is read,
// its connection is closed, and the heap does not grow by the bodies.
func TestUnauthenticatedHTTPBodiesAreNotReadIntoMemory(t *testing.T) {
	r := newHistoryRig(t)
	r.start()
	const conns, body = 40, 2 << 20
	// A publish whose base64 payload never ends: the JSON decoder reads
	// on, holding what it read. One buffer for every writer: no
	// client-side copies.
	chunk := []byte(`{"event_type":"a.b","payload":"` + strings.Repeat("A", body-1-len(`{"event_type":"a.b","payload":"`)))
	before := heapInUse()
	var wg sync.WaitGroup
	cs := make([]net.Conn, conns)
	for i := range conns {
		c, err := net.Dial("tcp", r.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(time.Minute)) // bounds a broken server, not a wait
		cs[i] = c
		wg.Go(func() {
			fmt.Fprintf(c, "POST /v1/events HTTP/1.1\r\nHost: ingest\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", body)
			_, _ = c.Write(chunk) // refused early: the write fails, which is the point
		})
	}
	wg.Wait() // every writer finished: the server read its body or refused it
	grown := int64(heapInUse()) - int64(before)
	t.Logf("heap in use grew by %.1f MiB with %d unauthenticated %d MiB bodies held open", float64(grown)/(1<<20), conns, body>>20)
	if grown > unauthenticatedBudget {
		t.Fatalf("heap grew by %d MiB: the unauthenticated bodies were read into memory", grown>>20)
	}
	for i, c := range cs {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("connection %d: no answer: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), `"code":16`) {
			t.Fatalf("connection %d: %s %s, want 401 with code 16 (UNAUTHENTICATED)", i, resp.Status, b)
		}
	}
}

// TestUnauthenticatedGRPCMessagesAreNotReadIntoMemory is the second: one
// HTTP/2 connection opens 100 PublishEvent streams without an API key,
// each announcing a 2 MiB message and sending half of it. grpc-go
// received a whole message before the auth interceptor ran, so each
// stream buffered what it was sent. Now the key is checked when the
// stream's headers arrive (an InTapHandle): each stream is answered
// UNAUTHENTICATED at once and its data is never buffered.
func TestUnauthenticatedGRPCMessagesAreNotReadIntoMemory(t *testing.T) {
	r := newHistoryRig(t)
	r.start()
	// HTTP/2 without TLS (what gRPC speaks here), streams multiplexed
	// on one connection.
	protocols := new(http.Protocols)
	protocols.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: protocols}
	defer tr.CloseIdleConnections()
	const streams, announced, sent = 100, 2 << 20, 1 << 20
	chunk := make([]byte, sent)
	prefix := binary.BigEndian.AppendUint32([]byte{0}, announced)
	before := heapInUse()
	var writers, calls sync.WaitGroup
	codes := make(chan string, streams)
	for range streams {
		pr, pw := io.Pipe()
		writers.Go(func() {
			if _, err := pw.Write(prefix); err == nil {
				_, _ = pw.Write(chunk)
			}
		})
		calls.Go(func() {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+r.addr+"/hookline.v1.EventService/PublishEvent", pr)
			req.Header.Set("Content-Type", "application/grpc")
			req.Header.Set("TE", "trailers")
			resp, err := tr.RoundTrip(req)
			if err != nil {
				pr.CloseWithError(err)
				codes <- "error: " + err.Error()
				return
			}
			pr.CloseWithError(io.ErrClosedPipe) // the answer is in: stop sending
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			code := resp.Header.Get("Grpc-Status")
			if code == "" {
				code = resp.Trailer.Get("Grpc-Status")
			}
			codes <- code
		})
	}
	writers.Wait() // every stream sent its half, or was refused before
	grown := int64(heapInUse()) - int64(before)
	t.Logf("heap in use grew by %.1f MiB with %d unauthenticated half-sent %d MiB messages", float64(grown)/(1<<20), streams, announced>>20)
	if grown > unauthenticatedBudget {
		t.Fatalf("heap grew by %d MiB: the unauthenticated messages were buffered", grown>>20)
	}
	calls.Wait()
	close(codes)
	// Each stream is refused UNAUTHENTICATED; a client that goes on
	// sending for refused streams has its connection closed once it
	// passes what a connection may send before authenticating.
	for code := range codes {
		if code != "16" && !strings.HasPrefix(code, "error: ") {
			t.Fatalf("a stream ended with grpc-status %q, want 16 (UNAUTHENTICATED) or the connection closed", code)
		}
	}
}

// closedWithin reads c until the server closes it; it fails the test if
// the connection is still open after bound (a bound on a broken server,
// not a wait: the close is what the test waits for).
func closedWithin(t *testing.T, c net.Conn, bound time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(bound))
	_, err := io.Copy(io.Discard, c)
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection is still open after %v", bound)
	}
}

// TestAConnectionThatNeverAuthenticatesIsClosed: a gRPC connection that
// opens (preface, settings) and never makes an authenticated call is
// closed after the pre-authentication timeout, as is an HTTP one that
// only asks for /healthz.
func TestAConnectionThatNeverAuthenticatesIsClosed(t *testing.T) {
	r := newHistoryRig(t)
	r.prepare = func(s *Service) { s.edge.preauth.timeout = 200 * time.Millisecond }
	r.start()
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	if err := http2.NewFramer(c, c).WriteSettings(); err != nil {
		t.Fatal(err)
	}
	closedWithin(t, c, 20*time.Second)

	h, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	fmt.Fprintf(h, "GET /healthz HTTP/1.1\r\nHost: ingest\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(h), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz without a key: %s", resp.Status)
	}
	closedWithin(t, h, 20*time.Second)
}

// TestASlowHTTPBodyIsCutOff: an authenticated HTTP/JSON call that sends
// part of its body and stops is cut off after --http-body-timeout.
func TestASlowHTTPBodyIsCutOff(t *testing.T) {
	r := newHistoryRig(t)
	r.configure = func(c *Config) { c.HTTPBodyTimeout = 300 * time.Millisecond }
	r.start()
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/events HTTP/1.1\r\nHost: ingest\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"event_type\":", historyTestKey)
	closedWithin(t, c, 20*time.Second)
}

// TestUnauthenticatedConnectionsShareOneBudget: once connections that
// have not authenticated hold the budget, the next is closed at accept;
// one authenticating frees its share for another. A connection sending
// more than its own share before authenticating is closed.
func TestUnauthenticatedConnectionsShareOneBudget(t *testing.T) {
	p := newPreauth(3 * preauthConnCost)
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := p.listener(raw)
	defer ln.Close()
	accepted := make(chan net.Conn)
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	var server []net.Conn
	for range 3 {
		dial()
		server = append(server, <-accepted)
	}
	closedWithin(t, dial(), 20*time.Second) // over the budget: closed, never handed to a server
	p.authenticated(server[0].RemoteAddr().String())
	client := dial()
	fourth := <-accepted
	if got := p.used.Load(); got != 3*preauthConnCost {
		t.Fatalf("budget used %d, want 3 connections' cost %d", got, 3*preauthConnCost)
	}
	// The fourth sends more than a connection may before authenticating.
	go func() { _, _ = client.Write(make([]byte, preauthConnBytes+1)) }()
	buf := make([]byte, 64<<10)
	var readErr error
	for readErr == nil {
		_, readErr = fourth.Read(buf)
	}
	if !errors.Is(readErr, errPreauthBudget) {
		t.Fatalf("reading past the per-connection share: %v, want errPreauthBudget", readErr)
	}
	if got := p.used.Load(); got != 2*preauthConnCost {
		t.Fatalf("budget used %d after the fourth was closed, want %d", got, 2*preauthConnCost)
	}
}
