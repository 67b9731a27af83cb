package ingest

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/encoding/protojson"
)

// What a caller without an API key can make ingest hold (docs/security.md,
// "Limits and quotas"). The key is checked on the headers, before any
// body: by authHTTP around the HTTP/JSON gateway, and by tapAuth when a
// gRPC stream's headers arrive, so an unauthenticated caller never gets a
// body or a message buffered. What is left is the connection itself and
// its headers, bounded here:
//   - per connection: preauthConnBytes read before its first
//     authenticated call (TLS hello, HTTP/2 preface, headers: HTTP/1.1
//     headers are capped at maxHeaderBytes, gRPC's at maxHeaderBytes too),
//     and preauthTimeout to make one;
//   - in all: --max-unauthenticated-bytes, the sum over connections not
//     yet authenticated of preauthConnCost plus what they sent; a
//     connection that would pass it is closed (at accept, or at the read
//     that passes it).
const (
	maxHeaderBytes   = 64 << 10
	preauthConnBytes = 2*maxHeaderBytes + 16<<10
	// preauthConnCost is what an accepted connection costs before it
	// sends anything: its goroutines and buffers (gRPC's read and write
	// buffers are 32 KiB each).
	preauthConnCost = 96 << 10
	preauthTimeout  = 30 * time.Second
)

var errPreauthBudget = errors.New("connection closed: it sent too much, or took too long, before authenticating")

// preauth tracks the connections that have not made an authenticated
// call yet. It is safe for concurrent use.
type preauth struct {
	limit   int64
	timeout time.Duration
	used    atomic.Int64
	// conns maps a connection's remote address to it, for the gRPC tap
	// and the HTTP handler, which see only the address.
	conns sync.Map
}

func newPreauth(limit int64) *preauth { return &preauth{limit: limit, timeout: preauthTimeout} }

// listener returns ln whose connections are charged to p until they
// authenticate.
func (p *preauth) listener(ln net.Listener) net.Listener { return &preauthListener{Listener: ln, p: p} }

type preauthListener struct {
	net.Listener
	p *preauth
}

func (l *preauthListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.p.used.Add(preauthConnCost) > l.p.limit {
			l.p.used.Add(-preauthConnCost)
			_ = c.Close() // over the budget: refused, the server goes on
			continue
		}
		pc := &preauthConn{Conn: c, p: l.p, key: c.RemoteAddr().String(), charged: preauthConnCost}
		l.p.conns.Store(pc.key, pc)
		pc.timer = time.AfterFunc(l.p.timeout, func() {
			if pc.release() {
				_ = pc.Conn.Close()
			}
		})
		return pc, nil
	}
}

// preauthConn is a connection charged to its preauth until authenticated.
type preauthConn struct {
	net.Conn
	p     *preauth
	key   string
	timer *time.Timer

	// over is set with done: reads after it skip the lock.
	over atomic.Bool
	mu   sync.Mutex
	// charged is what this connection holds of the budget; done once it
	// authenticated or closed (then nothing is charged).
	charged int64
	done    bool
}

func (c *preauthConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n == 0 || c.over.Load() {
		return n, err
	}
	c.mu.Lock()
	if c.done {
		c.mu.Unlock()
		return n, err
	}
	c.charged += int64(n)
	over := c.charged > preauthConnCost+preauthConnBytes || c.p.used.Add(int64(n)) > c.p.limit
	c.mu.Unlock()
	if over {
		c.release()
		_ = c.Conn.Close()
		return 0, errPreauthBudget
	}
	return n, err
}

// release ends c's charge; it reports whether c was still unauthenticated.
func (c *preauthConn) release() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return false
	}
	c.done = true
	c.over.Store(true)
	c.p.used.Add(-c.charged)
	c.charged = 0
	c.timer.Stop()
	c.p.conns.CompareAndDelete(c.key, c)
	return true
}

func (c *preauthConn) Close() error {
	c.release()
	return c.Conn.Close()
}

// authenticated takes the connection from remote addr off the budget.
func (p *preauth) authenticated(remote string) {
	if c, ok := p.conns.Load(remote); ok {
		c.(*preauthConn).release()
	}
}

// exemptFromAuth reports whether a gRPC method answers without an API
// key (health and reflection, as the auth interceptor's selector says).
func exemptFromAuth(fullMethod string) bool {
	return strings.HasPrefix(fullMethod, "/grpc.health.v1.Health/") ||
		strings.HasPrefix(fullMethod, "/grpc.reflection.v1.ServerReflection/") ||
		strings.HasPrefix(fullMethod, "/grpc.reflection.v1alpha.ServerReflection/")
}

// tapAuth refuses a gRPC stream whose headers carry no valid API key
// before the stream exists, so none of its message is received; the auth
// interceptor still checks the key's scope. It runs on the connection's
// reader goroutine: a map look-up, nothing that blocks.
func (e *edge) tapAuth(ctx context.Context, info *tap.Info) (context.Context, error) {
	if exemptFromAuth(info.FullMethodName) {
		return ctx, nil
	}
	if _, err := e.keys.Authenticate(bearer(info.Header)); err != nil {
		return ctx, err
	}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		e.preauth.authenticated(p.Addr.String())
	}
	return ctx, nil
}

// bearer returns the value of the "authorization" metadata, "" if none.
func bearer(md metadata.MD) string {
	if v := md.Get("authorization"); len(v) > 0 {
		return v[0]
	}
	return ""
}

// authHTTP answers 401 to an HTTP/JSON call without a valid API key
// before reading any of its body, and closes its connection; the gRPC
// call the gateway makes checks the key's scope as for every caller.
// The health check (GET /healthz) needs no key.
func (e *edge) authHTTP(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			h.ServeHTTP(w, r)
			return
		}
		auth := r.Header.Get("Authorization")
		if auth == "" {
			// grpc-gateway forwards Grpc-Metadata-Authorization as the
			// same metadata.
			auth = r.Header.Get("Grpc-Metadata-Authorization")
		}
		if _, err := e.keys.Authenticate(auth); err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("WWW-Authenticate", "Bearer")
			w.Header().Set("Connection", "close") // the body is never read
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write(statusJSON(status.Convert(err)))
			return
		}
		e.preauth.authenticated(r.RemoteAddr)
		if r.ContentLength != 0 {
			e.bodyDeadline(w, r)
		}
		h.ServeHTTP(w, r)
	})
}

// bodyDeadline gives r's body --http-body-timeout to arrive, lifted once
// it has been read: a read deadline left on the connection would, when
// it passed during a long call, cancel the call (net/http's background
// read), which is why http.Server.ReadTimeout is not used.
func (e *edge) bodyDeadline(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(e.now().Add(e.bodyTimeout)) != nil {
		return
	}
	r.Body = &deadlineBody{ReadCloser: r.Body, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
}

// deadlineBody lifts its connection's read deadline once the body has
// been read to its end, and only then: net/http reads what a handler
// left of a body after it returns, and that read must stay bounded too.
type deadlineBody struct {
	io.ReadCloser
	lift func()
	once sync.Once
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.once.Do(b.lift)
	}
	return n, err
}

// jsonStatus encodes error bodies as the gateway does.
var jsonStatus = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}

// statusJSON is st as the gateway's error body (google.rpc.Status).
func statusJSON(st *status.Status) []byte {
	b, err := jsonStatus.Marshal(st.Proto())
	if err != nil {
		return []byte(`{"code":16,"message":"unauthenticated","details":[]}`)
	}
	return append(b, '\n')
}
