package connmux_test

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hookline/hookline/platform/connmux"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func serve(t *testing.T, sniff time.Duration) (addr string, m *connmux.Mux) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m = connmux.New(ln, sniff)
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, health.NewServer())
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "http:"+r.Proto)
	}), ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { _ = gs.Serve(m.GRPC()) }()
	go func() { _ = hs.Serve(m.HTTP()) }()
	go func() { served <- m.Serve() }()
	t.Cleanup(func() {
		gs.Stop()
		_ = hs.Close()
		_ = m.Close()
		if err := <-served; !errors.Is(err, net.ErrClosed) {
			t.Errorf("Serve = %v, want net.ErrClosed", err)
		}
	})
	return ln.Addr().String(), m
}

func TestGRPCAndHTTPShareOnePort(t *testing.T) {
	addr, _ := serve(t, 5*time.Second)
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	resp, err := healthpb.NewHealthClient(cc).Check(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("gRPC health = %v, %v", resp, err)
	}
	for _, method := range []string{"GET", "POST", "PUT", "PATCH"} {
		req, _ := http.NewRequestWithContext(t.Context(), method, "http://"+addr+"/", nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if string(body) != "http:HTTP/1.1" {
			t.Fatalf("%s: body %q", method, body)
		}
	}
}

func TestSilentConnectionIsClosedAfterSniffTimeout(t *testing.T) {
	addr, _ := serve(t, 50*time.Millisecond)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read = %v, want EOF (closed by the mux)", err)
	}
}

func TestALPNGivesHTTP1ToClientsThatOfferIt(t *testing.T) {
	cert := httptest.NewTLSServer(http.NotFoundHandler())
	defer cert.Close()
	cfg := connmux.ALPN(cert.TLS)
	tests := []struct {
		give []string
		want string
	}{
		{[]string{"h2"}, "h2"},
		{[]string{"h2", "http/1.1"}, "http/1.1"},
		{[]string{"http/1.1"}, "http/1.1"},
	}
	for _, tt := range tests {
		got, err := cfg.GetConfigForClient(&tls.ClientHelloInfo{SupportedProtos: tt.give})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.NextProtos) != 1 || got.NextProtos[0] != tt.want {
			t.Errorf("offered %v: server protos %v, want [%s]", tt.give, got.NextProtos, tt.want)
		}
	}
}

// BenchmarkUnaryCall compares gRPC calls over one connection served
// straight from the listener and through a Mux: the Mux only touches a
// connection's first bytes, so the two should not differ.
func BenchmarkUnaryCall(b *testing.B) {
	for _, viaMux := range []bool{false, true} {
		name := "direct"
		if viaMux {
			name = "connmux"
		}
		b.Run(name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			gs := grpc.NewServer()
			healthpb.RegisterHealthServer(gs, health.NewServer())
			defer gs.Stop()
			if viaMux {
				m := connmux.New(ln, 5*time.Second)
				defer m.Close()
				go func() { _ = m.Serve() }()
				go func() { _ = gs.Serve(m.GRPC()) }()
			} else {
				go func() { _ = gs.Serve(ln) }()
			}
			cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			defer cc.Close()
			hc := healthpb.NewHealthClient(cc)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := hc.Check(b.Context(), &healthpb.HealthCheckRequest{}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
