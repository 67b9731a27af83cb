package harness

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// KafkaLink is the network between one client process and the Kafka
// cluster, as a loopback TCP proxy the harness controls: the process is
// given the link's bootstrap address, and every broker address Kafka
// hands it (Metadata, FindCoordinator, DescribeCluster) is rewritten to
// a port of the link that forwards to that broker. Partition makes the
// link silent in both directions (connections stay open and nothing
// arrives, as when packets are dropped; new connections are accepted
// and get no answer), Heal lets what was held through, Delay slows every
// Kafka request and response by d. Other processes' links, and the
// brokers' own traffic, are not touched: it is a fault between one
// service and the brokers. Safe for concurrent use.
type KafkaLink struct {
	Name string

	mu        sync.Mutex
	closed    bool
	held      chan struct{} // non-nil while partitioned: closed by Heal
	delay     time.Duration
	ports     map[string]*linkPort // upstream host:port → its local port
	bootstrap string
	conns     map[net.Conn]struct{}
}

// linkPort is one local listener forwarding to one broker.
type linkPort struct {
	ln       net.Listener
	upstream string
}

// NewKafkaLink starts a link to the cluster whose bootstrap brokers
// are upstream and returns it; Bootstrap is what to give the client.
func NewKafkaLink(name string, upstream ...string) (*KafkaLink, error) {
	l := &KafkaLink{Name: name, ports: map[string]*linkPort{}, conns: map[net.Conn]struct{}{}}
	var seeds []string
	for _, u := range upstream {
		p, err := l.portFor(u)
		if err != nil {
			l.Close()
			return nil, err
		}
		seeds = append(seeds, p.ln.Addr().String())
	}
	l.bootstrap = strings.Join(seeds, ",")
	return l, nil
}

// Bootstrap is the link's addresses of the upstream bootstrap brokers,
// comma-separated.
func (l *KafkaLink) Bootstrap() string { return l.bootstrap }

// Partition cuts the link: nothing more passes either way until Heal.
func (l *KafkaLink) Partition() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == nil {
		l.held = make(chan struct{})
	}
}

// Heal ends a partition: what was held passes, in order.
func (l *KafkaLink) Heal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held != nil {
		close(l.held)
		l.held = nil
	}
}

// Delay slows every request and response on the link by d (0: none).
func (l *KafkaLink) Delay(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.delay = d
}

// Close stops every listener and connection of the link.
func (l *KafkaLink) Close() {
	l.mu.Lock()
	l.closed = true
	if l.held != nil {
		close(l.held)
		l.held = nil
	}
	for _, p := range l.ports {
		_ = p.ln.Close()
	}
	for c := range l.conns {
		_ = c.Close()
	}
	l.mu.Unlock()
}

// gate waits while the link is partitioned, then for its delay; it
// reports false once the link is closed.
func (l *KafkaLink) gate() bool {
	for {
		l.mu.Lock()
		held, delay, closed := l.held, l.delay, l.closed
		l.mu.Unlock()
		if closed {
			return false
		}
		if held != nil {
			<-held
			continue
		}
		if delay > 0 {
			time.Sleep(delay)
		}
		return true
	}
}

// portFor returns the local port forwarding to upstream, listening on a
// new free loopback port the first time.
func (l *KafkaLink) portFor(upstream string) (*linkPort, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p := l.ports[upstream]; p != nil {
		return p, nil
	}
	if l.closed {
		return nil, net.ErrClosed
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &linkPort{ln: ln, upstream: upstream}
	l.ports[upstream] = p
	go l.accept(p)
	return p, nil
}

func (l *KafkaLink) track(c net.Conn, on bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if on {
		if l.closed {
			return false
		}
		l.conns[c] = struct{}{}
	} else {
		delete(l.conns, c)
	}
	return true
}

func (l *KafkaLink) accept(p *linkPort) {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go l.serve(c, p.upstream)
	}
}

// serve forwards one client connection to upstream, frame by frame.
func (l *KafkaLink) serve(c net.Conn, upstream string) {
	if !l.track(c, true) {
		_ = c.Close()
		return
	}
	defer func() {
		l.track(c, false)
		_ = c.Close()
	}()
	if !l.gate() { // a partitioned link does not connect either
		return
	}
	u, err := net.DialTimeout("tcp", upstream, 10*time.Second)
	if err != nil {
		// The broker is gone (killed, not yet back): answer as a direct
		// connection would have, refused — a reset, not the orderly
		// close the deferred Close would send. kgo takes an end of file
		// on a connection's first read for a TLS or SASL mistake and
		// does not retry the request (ErrFirstReadEOF): behind the link,
		// every EndTxn in flight to a killed coordinator failed at once
		// with "broker closed the connection immediately", where a
		// direct connection's refusal makes kgo find the coordinator
		// again and retry.
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		return
	}
	if !l.track(u, true) {
		_ = u.Close()
		return
	}
	defer func() {
		l.track(u, false)
		_ = u.Close()
	}()
	// Requests carry their key and version; the response to correlation
	// id n is decoded with the version of request n.
	pending := make(chan reqHeader, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { _ = u.Close(); _ = c.Close() }()
		for {
			frame, err := readFrame(u)
			if err != nil || !l.gate() {
				return
			}
			var h reqHeader
			select {
			case h = <-pending:
			default:
				return // a response nobody asked for
			}
			if _, err := c.Write(l.rewrite(h, frame)); err != nil {
				return
			}
		}
	}()
	for {
		frame, err := readFrame(c)
		if err != nil || len(frame) < 12 || !l.gate() {
			break
		}
		h := reqHeader{key: int16(binary.BigEndian.Uint16(frame[4:])), version: int16(binary.BigEndian.Uint16(frame[6:])),
			corr: int32(binary.BigEndian.Uint32(frame[8:]))}
		pending <- h
		if _, err := u.Write(frame); err != nil {
			break
		}
	}
	_ = u.Close()
	<-done
}

type reqHeader struct {
	key, version int16
	corr         int32
}

// readFrame reads one size-prefixed Kafka message, prefix included.
func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 256<<20 {
		return nil, fmt.Errorf("kafka frame of %d bytes", n)
	}
	buf := make([]byte, 4+n)
	copy(buf, size[:])
	_, err := io.ReadFull(r, buf[4:])
	return buf, err
}

// Capped protocol versions: from Fetch v16 on, an error answer may
// carry the new leader's address (KIP-951), which the link would have to
// find in every (large) fetch response; capped, fetches pass untouched.
// Produce is not capped (transactions v2 need Produce v12): its small
// responses are decoded and their leader addresses rewritten.
var linkMaxVersion = map[int16]int16{1: 15}

// rewrite returns the response frame with every broker address it
// carries replaced by the link's port for that broker. A response it
// cannot decode passes unchanged.
func (l *KafkaLink) rewrite(h reqHeader, frame []byte) []byte {
	switch h.key {
	case 3, 10, 60, 18: // Metadata, FindCoordinator, DescribeCluster, ApiVersions
	case 0: // Produce: only if it may carry a leader's address (v10+)
		if h.version < 10 {
			return frame
		}
	default:
		return frame
	}
	resp := kmsg.ResponseForKey(h.key)
	resp.SetVersion(h.version)
	body := frame[8:] // after size and correlation id
	flexHeader := resp.IsFlexible() && h.key != 18
	if flexHeader {
		rest, ok := skipTags(body)
		if !ok {
			return frame
		}
		body = rest
	}
	if err := resp.ReadFrom(body); err != nil {
		return frame
	}
	var err error
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		for i := range r.Brokers {
			r.Brokers[i].Host, r.Brokers[i].Port, err = l.local(r.Brokers[i].Host, r.Brokers[i].Port)
		}
	case *kmsg.FindCoordinatorResponse:
		if r.Host != "" {
			r.Host, r.Port, err = l.local(r.Host, r.Port)
		}
		for i := range r.Coordinators {
			if r.Coordinators[i].Host != "" && err == nil {
				r.Coordinators[i].Host, r.Coordinators[i].Port, err = l.local(r.Coordinators[i].Host, r.Coordinators[i].Port)
			}
		}
	case *kmsg.ProduceResponse:
		if len(r.Brokers) == 0 {
			return frame
		}
		for i := range r.Brokers {
			r.Brokers[i].Host, r.Brokers[i].Port, err = l.local(r.Brokers[i].Host, r.Brokers[i].Port)
		}
	case *kmsg.DescribeClusterResponse:
		for i := range r.Brokers {
			r.Brokers[i].Host, r.Brokers[i].Port, err = l.local(r.Brokers[i].Host, r.Brokers[i].Port)
		}
	case *kmsg.ApiVersionsResponse:
		for i, k := range r.ApiKeys {
			if m, ok := linkMaxVersion[k.ApiKey]; ok && k.MaxVersion > m {
				r.ApiKeys[i].MaxVersion = m
			}
		}
	}
	if err != nil {
		return frame
	}
	out := make([]byte, 8, len(frame)+64)
	binary.BigEndian.PutUint32(out[4:], uint32(h.corr))
	if flexHeader {
		out = append(out, 0) // no header tags
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out
}

// local maps a broker address to the link's port for it.
func (l *KafkaLink) local(host string, port int32) (string, int32, error) {
	p, err := l.portFor(net.JoinHostPort(host, strconv.Itoa(int(port))))
	if err != nil {
		return host, port, err
	}
	a := p.ln.Addr().(*net.TCPAddr)
	return a.IP.String(), int32(a.Port), nil
}

// skipTags skips a flexible header's tagged fields.
func skipTags(b []byte) ([]byte, bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, false
	}
	b = b[k:]
	for range n {
		_, k := binary.Uvarint(b) // tag
		if k <= 0 {
			return nil, false
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < size {
			return nil, false
		}
		b = b[k+int(size):]
	}
	return b, true
}
