package ingest

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/hookline/hookline/platform/config"
	"github.com/hookline/hookline/services/ingest/apikey"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Test API keys, strong enough for outside dev mode.
const (
	acmeKey  = "hk_3f9a1c7e5b2d8046f1e9a7c3b5d2084e6a1f3c9e7b5d2a80"
	otherKey = "hk_c41e8b27f05d93a6e2c7b18f4d60a395b7e21c8f06d4a9b3"
)

// tenantCtx is a request context authenticated as tenant, admin scope.
func tenantCtx(t *testing.T, tenant string) context.Context {
	return apikey.WithPrincipal(t.Context(), apikey.Principal{Tenant: tenant, Scope: apikey.ScopeAdmin})
}

func newURLTestService(t *testing.T, configure func(*Config)) *Service {
	t.Helper()
	cfg, err := config.Defaults[Config]()
	if err != nil {
		t.Fatal(err)
	}
	cfg.APIKeys = []string{"acme:" + acmeKey, "other:" + otherKey}
	cfg.Secrets.InsecurePlaintext = true // unit tests: no key file
	configure(&cfg)
	s, err := New(cfg, WithResolver(func(_ context.Context, host string) ([]net.IP, error) {
		return map[string][]net.IP{
			"intranet.acme.test": {net.ParseIP("10.20.1.2")},
			"metadata.test":      {net.ParseIP("169.254.169.254")},
		}[host], nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// An endpoint URL is checked with its tenant's guard: the operator's
// --tenant-allow-cidrs admit that tenant's internal receivers only, a
// refusal does not name the address a name resolved to, and a metadata
// address is refused even in dev mode.
func TestEndpointURLIsCheckedWithItsTenantsAllowList(t *testing.T) {
	s := newURLTestService(t, func(c *Config) { c.TenantAllowCIDRs = []string{"acme=10.20.0.0/16"} })
	acme, other := tenantCtx(t, "acme"), tenantCtx(t, "other")
	if err := s.urls.validateURL(acme, "https://intranet.acme.test/hooks"); err != nil {
		t.Fatalf("acme's allow-listed receiver: %v", err)
	}
	err := s.urls.validateURL(other, "https://intranet.acme.test/hooks")
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `cannot resolve "intranet.acme.test" to an allowed address`) || strings.Contains(err.Error(), "10.20.1.2") {
		t.Fatalf("another tenant: %v, want InvalidArgument saying it does not resolve to an allowed address, without the address", err)
	}
	for _, u := range []string{"https://[fe80::1%25eth0]/", "https://[::1%25lo]:8443/", "https://[fd00:ec2::254%25eth0]/", "https://[64:ff9b::7f00:1]/", "https://[2002:a00:1::]/"} {
		if err := s.urls.validateURL(acme, u); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", u, err)
		}
	}
	dev := newURLTestService(t, func(c *Config) { c.AllowPrivate = true })
	for _, u := range []string{"https://169.254.169.254/latest/", "https://[::ffff:169.254.169.254]/", "https://100.100.100.200/", "https://[fd00:ec2::254]/"} {
		if err := dev.urls.validateURL(acme, u); status.Code(err) != codes.InvalidArgument {
			t.Errorf("dev mode, %s: %v, want InvalidArgument", u, err)
		}
	}
}
