package ingest

import (
	"bytes"
	"net"
	"sync"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"golang.org/x/net/http2"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// serve runs s's gRPC server (no Kafka: only what answers before Kafka
// is reached can be called) and returns its address.
func serve(t *testing.T, s *Service) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := s.grpcServer()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// Each tenant has its own PublishEvent token bucket: beyond it a call is
// RESOURCE_EXHAUSTED carrying a google.rpc.RetryInfo with the delay
// until a token is free, and another tenant is not slowed.
func TestPublishRateLimitIsPerTenantWithARetryDelay(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := newURLTestService(t, func(c *Config) { c.PublishRate, c.PublishBurst = 2, 2 })
	s.now = clock
	conn, err := grpc.NewClient(serve(t, s), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	events := hooklinev1.NewEventServiceClient(conn)
	publish := func(key string) error {
		ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+key)
		// No payload: refused as INVALID_ARGUMENT once past the limit,
		// before Kafka.
		_, err := events.PublishEvent(ctx, &hooklinev1.PublishEventRequest{EventType: "a.b"})
		return err
	}
	acme, other := acmeKey, otherKey // the keys newURLTestService admits
	for range 2 {
		if err := publish(acme); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("within the burst: %v, want the handler's InvalidArgument", err)
		}
	}
	err = publish(acme)
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("over the rate: %v, want ResourceExhausted", err)
	}
	var delay time.Duration
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			delay = ri.GetRetryDelay().AsDuration()
		}
	}
	if delay != 500*time.Millisecond {
		t.Fatalf("RetryInfo delay %v, want 500ms (one token at 2/s)", delay)
	}
	if err := publish(other); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("another tenant: %v, want its own bucket", err)
	}
	mu.Lock()
	now = now.Add(delay)
	mu.Unlock()
	if err := publish(acme); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("after the retry delay: %v, want a token", err)
	}
}

// handshake opens a raw HTTP/2 connection to addr and returns its framer
// and the server's SETTINGS_MAX_CONCURRENT_STREAMS.
func handshake(t *testing.T, addr string) (*http2.Framer, uint32) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second)) // a bound on a broken server, not a wait
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			streams, _ := sf.Value(http2.SettingMaxConcurrentStreams)
			if err := fr.WriteSettingsAck(); err != nil {
				t.Fatal(err)
			}
			return fr, streams
		}
	}
}

// pings sends n pings and reads until n acks arrive (nil) or a GOAWAY
// does.
func pings(t *testing.T, fr *http2.Framer, n int) *http2.GoAwayFrame {
	t.Helper()
	for i := range n {
		if err := fr.WritePing(false, [8]byte{byte(i)}); err != nil {
			break // the server may already have closed the connection
		}
	}
	for acks := 0; acks < n; {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("connection ended after %d ping acks without GOAWAY: %v", acks, err)
		}
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			return f
		case *http2.PingFrame:
			if f.IsAck() {
				acks++
			}
		}
	}
	return nil
}

// The server announces --grpc-max-concurrent-streams in its HTTP/2
// SETTINGS, and sends a client pinging more often than
// --grpc-keepalive-min-time GOAWAY ENHANCE_YOUR_CALM "too_many_pings";
// a client within it may ping with no call open.
func TestServerLimitsStreamsAndEnforcesKeepalive(t *testing.T) {
	strict := newURLTestService(t, func(c *Config) { c.MaxConcurrentStreams, c.KeepaliveMinTime = 7, time.Hour })
	fr, streams := handshake(t, serve(t, strict))
	if streams != 7 {
		t.Fatalf("SETTINGS_MAX_CONCURRENT_STREAMS %d, want 7", streams)
	}
	ga := pings(t, fr, 10)
	if ga == nil || ga.ErrCode != http2.ErrCodeEnhanceYourCalm || !bytes.Equal(ga.DebugData(), []byte("too_many_pings")) {
		t.Fatalf("GOAWAY %v, want ENHANCE_YOUR_CALM too_many_pings", ga)
	}

	lenient := newURLTestService(t, func(c *Config) { c.KeepaliveMinTime = time.Nanosecond })
	fr, _ = handshake(t, serve(t, lenient))
	if ga := pings(t, fr, 10); ga != nil {
		t.Fatalf("pings within --grpc-keepalive-min-time got GOAWAY %v %q", ga.ErrCode, ga.DebugData())
	}
}
