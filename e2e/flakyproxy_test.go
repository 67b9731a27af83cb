package e2e

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// flakyPushback is the grpc-retry-pushback-ms the proxy sends with the
// first failure of a publish: longer than the client policy's first
// backoff (at most 0.2 s), so a retry that waits this long honoured it.
const flakyPushback = 700 * time.Millisecond

// flakyProxy stands between a client and ingest and forwards every unary
// call, except that the first three tries of each publish fail with the
// three codes a client must retry. The first is forwarded before it fails
// (its answer is "lost"), so the retry that gets through shows ingest's
// idempotency answering with the same event.
type flakyProxy struct {
	addr     string
	upstream *grpc.ClientConn

	mu    sync.Mutex
	tries map[string][]publishTry // by idempotency key
}

// publishTry is one PublishEvent the proxy received.
type publishTry struct {
	at       time.Time
	previous string // the grpc-previous-rpc-attempts header
	eventID  string // ingest's answer, when forwarded and answered
}

// flakyFailures are what the tries of one publish get before it passes.
var flakyFailures = []codes.Code{codes.Unavailable, codes.ResourceExhausted, codes.DeadlineExceeded}

func newFlakyProxy(t *testing.T, upstream string) *flakyProxy {
	t.Helper()
	cc, err := grpc.NewClient(upstream, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &flakyProxy{addr: ln.Addr().String(), upstream: cc, tries: map[string][]publishTry{}}
	srv := grpc.NewServer(grpc.UnknownServiceHandler(p.handle), grpc.ForceServerCodec(rawCodec{}))
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Stop()
		_ = cc.Close()
	})
	return p
}

// triesOf returns the publishes the proxy received with this key.
func (p *flakyProxy) triesOf(key string) []publishTry {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]publishTry(nil), p.tries[key]...)
}

func (p *flakyProxy) handle(_ any, ss grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(ss)
	var req []byte
	if err := ss.RecvMsg(&req); err != nil {
		return err
	}
	in, _ := metadata.FromIncomingContext(ss.Context())
	if method != hooklinev1.EventService_PublishEvent_FullMethodName {
		return p.pass(ss, method, in, req)
	}

	var pub hooklinev1.PublishEventRequest
	if err := proto.Unmarshal(req, &pub); err != nil {
		return status.Errorf(codes.InvalidArgument, "flaky proxy: %v", err)
	}
	try := publishTry{at: time.Now()}
	if v := in.Get("grpc-previous-rpc-attempts"); len(v) > 0 {
		try.previous = v[0]
	}
	p.mu.Lock()
	n := len(p.tries[pub.GetIdempotencyKey()])
	p.tries[pub.GetIdempotencyKey()] = append(p.tries[pub.GetIdempotencyKey()], try)
	p.mu.Unlock()

	if n >= len(flakyFailures) {
		return p.pass(ss, method, in, req, func(resp []byte) { p.answered(pub.GetIdempotencyKey(), n, resp) })
	}
	if n == 0 {
		// Forwarded, but the answer is lost: no header goes back (that
		// would commit the call and rule a retry out), only the failure
		// with a pushback the client must wait for.
		resp, _, _, err := p.forward(ss, method, in, req)
		if err == nil {
			p.answered(pub.GetIdempotencyKey(), n, resp)
		}
		ss.SetTrailer(metadata.Pairs("grpc-retry-pushback-ms", strconv.FormatInt(flakyPushback.Milliseconds(), 10)))
		return status.Error(flakyFailures[n], "flaky proxy: the answer was lost")
	}
	return status.Errorf(flakyFailures[n], "flaky proxy: try %d fails", n+1)
}

// answered keeps the event id of ingest's answer to try n of key.
func (p *flakyProxy) answered(key string, n int, resp []byte) {
	var out hooklinev1.PublishEventResponse
	if proto.Unmarshal(resp, &out) != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tries[key][n].eventID = out.GetEventId()
}

// pass forwards the call and passes the answer back, header, message and
// trailer, showing the message to each seen first.
func (p *flakyProxy) pass(ss grpc.ServerStream, method string, in metadata.MD, req []byte, seen ...func([]byte)) error {
	resp, header, trailer, err := p.forward(ss, method, in, req)
	ss.SetTrailer(trailer)
	if err != nil {
		return err
	}
	for _, f := range seen {
		f(resp)
	}
	if err := ss.SendHeader(header); err != nil {
		return err
	}
	return ss.SendMsg(&resp)
}

// forward makes the call upstream with the caller's API key.
func (p *flakyProxy) forward(ss grpc.ServerStream, method string, in metadata.MD, req []byte) (resp []byte, header, trailer metadata.MD, err error) {
	ctx := metadata.NewOutgoingContext(ss.Context(), metadata.MD{"authorization": in.Get("authorization")})
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = p.upstream.Invoke(ctx, method, &req, &resp, grpc.Header(&header), grpc.Trailer(&trailer), grpc.ForceCodec(rawCodec{}))
	return resp, header, trailer, err
}

// rawCodec passes messages through as bytes.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }

func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}

func (rawCodec) Name() string { return "proto" }
