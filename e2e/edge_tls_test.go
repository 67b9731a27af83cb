package e2e

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/tlsconf"
	"github.com/hookline/hookline/platform/tlsconf/tlstest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// TestIngestServesMutualTLSOnly calls the API with ingest serving mutual
// TLS (--grpc-tls-cert, --grpc-tls-key, --grpc-client-ca)
// and checks that a plaintext client, a client without a certificate and
// one whose certificate another CA signed are refused, and that a
// certificate written over the served one is served from then on,
// without a restart.
func TestIngestServesMutualTLSOnly(t *testing.T) {
	m := tlstest.NewMutualTLS(t, t.TempDir())
	srv, cli, foreign := m.Server, m.Client, m.Foreign
	clientConf := func(f tlstest.Files) *tls.Config {
		c, err := tlsconf.Client(srv.CA, f.Cert, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	st := startStack(t, func(c *stackConfig) {
		c.ingest.GRPCTLSCert, c.ingest.GRPCTLSKey, c.ingest.GRPCClientCA = srv.Cert, srv.Key, srv.CA
		c.clientCreds = credentials.NewTLS(clientConf(cli))
	})

	// The API works over mutual TLS: an endpoint made, an event published
	// to it (durable in Kafka when the call returns).
	rx := newReceiver(t, http.StatusOK)
	st.createEndpoint(rx.URL)
	if pub := st.publish("invoice.paid", `{"over":"mtls"}`); len(pub.GetDeliveries()) != 1 {
		t.Fatalf("publish over mutual TLS: %v", pub)
	}

	for name, creds := range map[string]credentials.TransportCredentials{
		"plaintext":                     insecure.NewCredentials(),
		"no client certificate":         credentials.NewTLS(clientConf(tlstest.Files{})),
		"a client cert from another CA": credentials.NewTLS(clientConf(foreign)),
	} {
		conn, err := grpc.NewClient(st.addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		conn.Close()
		if status.Code(err) != codes.Unavailable {
			t.Errorf("%s: %v; want the connection refused (Unavailable)", name, err)
		}
	}

	// Rotation: a new pair written over the files is served to new
	// connections once ingest reads them again (every 2 s at most).
	cert2, key2 := m.CA.Issue("server-2")
	for path, b := range map[string][]byte{srv.Key: key2, srv.Cert: cert2} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.After(waitFor)
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	for served := ""; served != "server-2"; {
		select {
		case <-deadline:
			t.Fatalf("the rotated certificate was not served; still %q", served)
		case <-poll.C:
		}
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", st.addr, clientConf(cli))
		if err != nil {
			t.Fatalf("handshake during rotation: %v", err)
		}
		served = c.ConnectionState().PeerCertificates[0].Subject.CommonName
		c.Close()
	}
	// The connection made before the rotation keeps working.
	if _, err := st.endpoints().ListEndpoints(st.ctx(), &hooklinev1.ListEndpointsRequest{}); err != nil {
		t.Fatalf("a call after the rotation: %v", err)
	}
}
