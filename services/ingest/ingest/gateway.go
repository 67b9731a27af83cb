package ingest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// gateway is the HTTP/JSON face of ingest: the google.api.http mapping
// of proto/hookline/v1 (grpc-gateway), served on the gRPC port for
// HTTP/1.1 connections (platform/connmux). Each HTTP call becomes a gRPC
// call to this same grpc.Server over an in-memory connection, so it
// passes the same interceptors (tracing, logging, auth), validation and
// limits; errors come back as the HTTP status of their gRPC code with a
// google.rpc.Status JSON body.
//
// The calls are spread over gatewayConns in-memory connections, each
// call on the one with the fewest in flight, so the streams one
// connection allows (--grpc-max-concurrent-streams) are not one queue
// for every HTTP caller; with the per-tenant cap on long calls
// (longcalls.go) and a deadline on every call (--http-call-timeout), one
// caller cannot hold the gateway.
type gateway struct {
	http.Handler
	conns *connPool
	mem   *bufconn.Listener
}

// gatewayConns is how many in-memory connections the gateway spreads
// its calls over.
const gatewayConns = 4

// connPool is a grpc.ClientConnInterface over several connections:
// each call goes to the one with the fewest calls in flight. Safe for
// concurrent use.
type connPool struct {
	conns    []*grpc.ClientConn
	inFlight []atomic.Int64
}

func (p *connPool) pick() int {
	best := 0
	for i := range p.conns {
		if p.inFlight[i].Load() < p.inFlight[best].Load() {
			best = i
		}
	}
	return best
}

func (p *connPool) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	i := p.pick()
	p.inFlight[i].Add(1)
	defer p.inFlight[i].Add(-1)
	return p.conns[i].Invoke(ctx, method, args, reply, opts...)
}

// NewStream counts a stream in flight until its context ends.
func (p *connPool) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	i := p.pick()
	p.inFlight[i].Add(1)
	cs, err := p.conns[i].NewStream(ctx, desc, method, opts...)
	if err != nil {
		p.inFlight[i].Add(-1)
		return nil, err
	}
	context.AfterFunc(cs.Context(), func() { p.inFlight[i].Add(-1) })
	return cs, nil
}

func (p *connPool) close() {
	for _, c := range p.conns {
		_ = c.Close()
	}
}

// newGateway serves srv on an in-memory listener and returns the HTTP
// handler calling it, for payloads of at most maxPayloadBytes
// (--max-payload-bytes) and calls that set no deadline ending after
// callTimeout (--http-call-timeout). Close the gateway after srv has
// stopped.
func newGateway(ctx context.Context, srv *grpc.Server, maxPayloadBytes int, callTimeout time.Duration) (*gateway, error) {
	mem := bufconn.Listen(256 << 10)
	go func() { _ = srv.Serve(mem) }() // ends when srv stops
	msgLimit := payloadLimit(maxPayloadBytes).doorBytes()
	conn := &connPool{inFlight: make([]atomic.Int64, gatewayConns)}
	for range gatewayConns {
		c, err := grpc.NewClient("passthrough:///ingest-gateway",
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return mem.DialContext(ctx) }),
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(msgLimit), grpc.MaxCallRecvMsgSize(msgLimit)),
		)
		if err != nil {
			conn.close()
			_ = mem.Close()
			return nil, fmt.Errorf("ingest: gateway connection: %w", err)
		}
		conn.conns = append(conn.conns, c)
	}
	jsonpb := &runtime.JSONPb{
		MarshalOptions: protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true},
		// A misspelt field is an error that names it, not a silent drop.
		UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
	}
	mux := runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, payloadJSON{jsonpb}),
		runtime.WithIncomingHeaderMatcher(headerMatcher),
		// The in-memory hop's own content-type is no business of HTTP's.
		runtime.WithOutgoingHeaderMatcher(func(key string) (string, bool) {
			if key == "content-type" {
				return "", false
			}
			return runtime.MetadataHeaderPrefix + key, true
		}),
		runtime.WithHealthzEndpoint(healthpb.NewHealthClient(conn)),
	)
	for _, register := range []func() error{
		func() error {
			return hooklinev1.RegisterEventServiceHandlerClient(ctx, mux, hooklinev1.NewEventServiceClient(conn))
		},
		func() error {
			return hooklinev1.RegisterEndpointServiceHandlerClient(ctx, mux, hooklinev1.NewEndpointServiceClient(conn))
		},
		func() error {
			return hooklinev1.RegisterDeliveryServiceHandlerClient(ctx, mux, hooklinev1.NewDeliveryServiceClient(conn))
		},
		func() error {
			return hooklinev1.RegisterLaneServiceHandlerClient(ctx, mux, hooklinev1.NewLaneServiceClient(conn))
		},
	} {
		if err := register(); err != nil {
			conn.close()
			_ = mem.Close()
			return nil, fmt.Errorf("ingest: gateway: %w", err)
		}
	}
	return &gateway{Handler: callDeadline(callTimeout, payloadLimit(maxPayloadBytes).limitBody(mux)), conns: conn, mem: mem}, nil
}

// callDeadline gives an HTTP/JSON call that sets no deadline of its own
// (a Grpc-Timeout header) --http-call-timeout (timeout): the gRPC call
// the gateway makes ends then, whatever it waits on.
func callDeadline(timeout time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Grpc-Timeout") == "" {
			ctx, cancel := context.WithTimeout(r.Context(), timeout)
			defer cancel()
			r = r.WithContext(ctx)
		}
		h.ServeHTTP(w, r)
	})
}

// Close ends the in-memory connections.
func (g *gateway) Close() {
	g.conns.close()
	_ = g.mem.Close()
}

// headerMatcher forwards what grpc-gateway forwards by default
// (Authorization among it) and the W3C trace context, so an HTTP
// caller's trace continues into the RPC's span.
func headerMatcher(key string) (string, bool) {
	switch k := strings.ToLower(key); k {
	case "traceparent", "tracestate":
		return k, true
	}
	return runtime.DefaultHeaderMatcher(key)
}

// payloadJSON is the gateway's JSON codec: protojson, except that a
// request's bytes field named "payload" may also be given as the JSON
// document itself ({"payload":{"id":1}}) instead of its base64 (the
// protojson form for bytes, which still works: a JSON string is taken as
// base64).
type payloadJSON struct{ *runtime.JSONPb }

func (m payloadJSON) NewDecoder(r io.Reader) runtime.Decoder {
	return runtime.DecoderFunc(func(v any) error {
		pm, ok := v.(interface{ ProtoReflect() protoreflect.Message })
		if !ok || !hasBytesPayload(pm.ProtoReflect().Descriptor()) {
			return m.JSONPb.NewDecoder(r).Decode(v)
		}
		var raw json.RawMessage
		if err := json.NewDecoder(r).Decode(&raw); err != nil {
			return err
		}
		return explainPayload(m.Unmarshal(inlinePayload(raw), v), raw)
	})
}

func hasBytesPayload(d protoreflect.MessageDescriptor) bool {
	f := d.Fields().ByName("payload")
	return f != nil && f.Kind() == protoreflect.BytesKind && !f.IsList()
}

// inlinePayload rewrites {"payload": <JSON value>} to {"payload": "<base64
// of that value>"} when the value is neither a string nor null; anything
// else is returned unchanged for protojson to judge.
func inlinePayload(body []byte) []byte {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return body
	}
	p, ok := fields["payload"]
	if !ok {
		return body
	}
	p = bytes.TrimSpace(p)
	if len(p) == 0 || p[0] == '"' || string(p) == "null" {
		return body
	}
	fields["payload"] = json.RawMessage(strconv.Quote(base64.StdEncoding.EncodeToString(p)))
	out, err := json.Marshal(fields)
	if err != nil {
		return body
	}
	return out
}
