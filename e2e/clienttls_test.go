package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// testCA is a throwaway certificate authority.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// client issues a client certificate valid until notAfter and returns
// it and its key in PEM.
func (ca *testCA) client(t *testing.T, notAfter time.Time) (certPEM, keyPEM string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "hookline"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
}

// mtlsReceiver is an HTTPS receiver that requires a client certificate
// issued by ca; caPEM is its own certificate, for the endpoint's bundle.
func mtlsReceiver(t *testing.T, ca *testCA) (rx *httptest.Server, caPEM string, got chan string) {
	got = make(chan string, 16)
	rx = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.TLS.PeerCertificates[0].Subject.CommonName
		w.WriteHeader(http.StatusNoContent)
	}))
	rx.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.pool}
	rx.StartTLS()
	t.Cleanup(rx.Close)
	return rx, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rx.Certificate().Raw})), got
}

// TestMutualTLSToTheReceiver: a receiver that requires a client
// certificate from its CA gets the endpoint's (and is trusted through
// the endpoint's CA bundle); the answers show the certificate's expiry
// and never its key; a certificate from another CA is a classified
// (transient) TLS failure on the results topic; a key that does not
// match and an expired certificate are refused at create.
func TestMutualTLSToTheReceiver(t *testing.T) {
	st := startStack(t)
	ca := newTestCA(t, "receiver-ca")
	rx, rxPEM, got := mtlsReceiver(t, ca)
	notAfter := time.Now().Add(20 * 24 * time.Hour).Truncate(time.Second)
	certPEM, keyPEM := ca.client(t, notAfter)

	ep := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, EventTypes: []string{"mtls.good"},
		ClientTls: &hooklinev1.ClientTLS{Certificate: certPEM, PrivateKey: keyPEM, CaBundle: rxPEM}})
	ct := ep.GetEndpoint().GetClientTls()
	if ct.GetPrivateKey() != "" || !ct.GetPrivateKeySet() || !ct.GetNotAfter().AsTime().Equal(notAfter) {
		t.Fatalf("client_tls answered as key %q set %v not_after %v; want no key, set, %v", ct.GetPrivateKey(), ct.GetPrivateKeySet(), ct.GetNotAfter().AsTime(), notAfter)
	}
	st.publish("mtls.good", `{"n":1}`)
	st.deliveredOf(ep.GetEndpoint().GetId(), 1)
	if cn := <-got; cn != "hookline" {
		t.Fatalf("receiver saw client certificate %q", cn)
	}

	// A certificate that expires within 14 days: its endpoint's first
	// attempt brings an endpoint.client_certificate_expiring notice. The
	// first such notice on the topic is this endpoint's, not the one above
	// (20 days from its expiry).
	soonAfter := time.Now().Add(10 * 24 * time.Hour).Truncate(time.Second)
	soonCert, soonKey := ca.client(t, soonAfter)
	soon := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, EventTypes: []string{"mtls.soon"},
		ClientTls: &hooklinev1.ClientTLS{Certificate: soonCert, PrivateKey: soonKey, CaBundle: rxPEM}})
	st.publish("mtls.soon", `{"n":1}`)
	st.deliveredOf(soon.GetEndpoint().GetId(), 1)
	<-got
	expiring := st.readMatching(st.topics.Notices, 1, func(r *kgo.Record) bool {
		var n hooklinev1.Notice
		return proto.Unmarshal(r.Value, &n) == nil && n.GetType() == hooklinev1.NoticeType_NOTICE_TYPE_CLIENT_CERTIFICATE_EXPIRING
	})
	var n hooklinev1.Notice
	if err := proto.Unmarshal(expiring[0].Value, &n); err != nil {
		t.Fatal(err)
	}
	if n.GetEndpointId() != soon.GetEndpoint().GetId() || !n.GetExpiresAt().AsTime().Equal(soonAfter) {
		t.Fatalf("certificate notice %v; want %s's, expiring at %v", &n, soon.GetEndpoint().GetId(), soonAfter)
	}

	// A certificate another CA issued: the handshake fails, classified
	// as today's TLS failures (transient), the cause on the results topic.
	other := newTestCA(t, "other-ca")
	wrongCert, wrongKey := other.client(t, notAfter)
	bad := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, EventTypes: []string{"mtls.wrong"},
		ClientTls: &hooklinev1.ClientTLS{Certificate: wrongCert, PrivateKey: wrongKey, CaBundle: rxPEM}, RetryPolicy: ladderPolicy(2, time.Hour)})
	st.publish("mtls.wrong", `{"n":1}`)
	res := st.resultsOf(bad.GetEndpoint().GetId(), 1)[0]
	if res.GetClass() != hooklinev1.OutcomeClass_OUTCOME_CLASS_TRANSIENT || res.GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED || !strings.Contains(res.GetError(), "tls") {
		t.Fatalf("wrong client certificate: %v; want a transient TLS failure, retry scheduled", res)
	}
	if strings.Contains(res.GetError(), "PRIVATE KEY") {
		t.Fatal("the result holds the key")
	}

	// Refused at create: a key that is not the certificate's, an
	// expired certificate, a CA bundle that is not PEM.
	_, otherKey := ca.client(t, notAfter)
	expiredCert, expiredKey := ca.client(t, time.Now().Add(-time.Minute))
	tests := []struct {
		name string
		give *hooklinev1.ClientTLS
		want string
	}{
		{"key mismatch", &hooklinev1.ClientTLS{Certificate: certPEM, PrivateKey: otherKey}, "client_tls: the certificate and private key are not a PEM certificate and its matching key"},
		{"expired", &hooklinev1.ClientTLS{Certificate: expiredCert, PrivateKey: expiredKey}, "client_tls.certificate: expired at"},
		{"no key", &hooklinev1.ClientTLS{Certificate: certPEM}, "client_tls.private_key: is required"},
		{"bad bundle", &hooklinev1.ClientTLS{Certificate: certPEM, PrivateKey: keyPEM, CaBundle: "not pem"}, "client_tls.ca_bundle: holds no PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := st.endpoints().CreateEndpoint(st.ctx(), &hooklinev1.CreateEndpointRequest{Url: rx.URL, ClientTls: tt.give})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("%v; want INVALID_ARGUMENT saying %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "PRIVATE KEY") {
				t.Fatal("the error holds the key")
			}
		})
	}
	noTopicHoldsACredential(t, st, []string{keyPEM, wrongKey, soonKey, strings.Split(keyPEM, "\n")[1]}, 8)
}
