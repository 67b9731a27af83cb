package attempt

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/classify"
	"github.com/hookline/hookline/platform/netguard"
)

// connectProxy is an HTTP CONNECT proxy on loopback that records the
// targets it was asked for and tunnels to them.
type connectProxy struct {
	*httptest.Server
	mu      sync.Mutex
	targets []string
}

func newConnectProxy(t *testing.T) *connectProxy {
	p := &connectProxy{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		p.mu.Lock()
		p.targets = append(p.targets, r.Host)
		p.mu.Unlock()
		up, err := net.Dial("tcp", r.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			_ = up.Close()
			return
		}
		_, _ = conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
		go func() { _, _ = io.Copy(up, conn); _ = up.Close() }()
		_, _ = io.Copy(conn, up)
		_ = conn.Close()
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *connectProxy) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.targets...)
}

// egressClient is a Client whose connections go through p, with
// receiver.test resolving to 127.0.0.1.
func egressClient(t *testing.T, p *connectProxy, allowPrivate bool) *Client {
	t.Helper()
	g, err := netguard.NewPolicy(allowPrivate, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(p.URL)
	c := New(g, WithEgressProxy(u), func(c *Client) {
		c.egress.lookup = func(_ context.Context, _, host string) ([]netip.Addr, error) {
			if host == "example.com" {
				return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
			}
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
	})
	return c
}

func TestEgressProxyTunnelsToTheCheckedIPWithTheOriginalNameForTLS(t *testing.T) {
	p := newConnectProxy(t)
	var host string
	rx := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host = r.Host
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rx.Close()
	port := rx.URL[strings.LastIndex(rx.URL, ":")+1:]
	c := egressClient(t, p, true)
	roots := x509.NewCertPool()
	roots.AddCert(rx.Certificate()) // httptest's certificate names example.com
	cr, err := c.Credentials("", CredentialSpec{RootCAs: roots})
	if err != nil {
		t.Fatal(err)
	}
	r := request(t, "https://example.com:"+port+"/hooks")
	r.Credentials = cr
	res, err := c.Do(t.Context(), r)
	if err != nil || res.StatusCode != http.StatusNoContent {
		t.Fatalf("through the proxy: %d %v, %v", res.StatusCode, res.Err, err)
	}
	if got := p.seen(); len(got) != 1 || got[0] != "127.0.0.1:"+port {
		t.Fatalf("the proxy was asked for %q; want one tunnel to the checked IP literal 127.0.0.1:%s", got, port)
	}
	if host != "example.com:"+port {
		t.Fatalf("the receiver got Host %q, want the URL's", host)
	}
}

func TestEgressProxyCannotReachWhatTheGuardRefuses(t *testing.T) {
	p := newConnectProxy(t)
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer rx.Close()
	port := rx.URL[strings.LastIndex(rx.URL, ":")+1:]
	c := egressClient(t, p, false) // loopback refused
	// A name that resolves to a refused address reads as one that does
	// not resolve (transient), as without a proxy; a refused literal is
	// permanent.
	res, err := c.Do(t.Context(), request(t, "http://example.com:"+port+"/"))
	if err != nil || res.Class != hooklinev1.OutcomeClass_OUTCOME_CLASS_TRANSIENT || !errors.Is(res.Err, netguard.ErrUnresolvable) {
		t.Fatalf("a name resolving to loopback through the proxy: %v %v, %v; want unresolvable", res.Class, res.Err, err)
	}
	res, err = c.Do(t.Context(), request(t, rx.URL+"/"))
	if err != nil || res.Class != hooklinev1.OutcomeClass_OUTCOME_CLASS_PERMANENT || !errors.Is(res.Err, classify.ErrRefusedDestination) {
		t.Fatalf("a loopback literal through the proxy: %v %v, %v; want a permanent refusal", res.Class, res.Err, err)
	}
	if got := p.seen(); len(got) != 0 {
		t.Fatalf("the proxy was asked for %q; want nothing (refused before it)", got)
	}
}

func TestTenantEgressProxiesOverrideTheDispatchersProxy(t *testing.T) {
	global, acmes := newConnectProxy(t), newConnectProxy(t)
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer rx.Close()
	gu, _ := url.Parse(global.URL)
	au, _ := url.Parse(acmes.URL)
	c := New(mustPolicy(t), WithEgressProxy(gu), WithTenantEgressProxies(map[string]*url.URL{"acme": au, "direct-co": nil}))
	for _, tenant := range []string{"other", "acme", "direct-co"} {
		r := request(t, rx.URL)
		r.Tenant = tenant
		if res, err := c.Do(t.Context(), r); err != nil || res.StatusCode != http.StatusNoContent {
			t.Fatalf("tenant %s: %d %v, %v", tenant, res.StatusCode, res.Err, err)
		}
	}
	if g, a := global.seen(), acmes.seen(); len(g) != 1 || len(a) != 1 {
		t.Fatalf("the dispatcher's proxy saw %q, acme's %q; want one tunnel each (other, acme), none for direct-co", g, a)
	}
}
