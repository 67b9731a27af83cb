package dispatcher

import (
	"strings"
	"testing"
)

func TestEgressProxyFlagTakesAnHTTPHostAndPortOnly(t *testing.T) {
	tests := []struct {
		give    string
		wantErr string
		wantN   int
	}{
		{"", "", 0},
		{"http://proxy.internal:4750", "", 1},
		{"http://user:pw@proxy.internal:4750/", "", 1},
		{"https://proxy.internal:4750", "give http://", 0},
		{"http://proxy.internal", "give http://", 0},
		{"http://user:s3cret@proxy.internal/x", "xxxxx", 0},
	}
	for _, tt := range tests {
		opts, err := egressProxy(tt.give)
		if tt.wantErr == "" && (err != nil || len(opts) != tt.wantN) {
			t.Errorf("egressProxy(%q) = %d options, %v; want %d", tt.give, len(opts), err, tt.wantN)
		}
		if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "s3cret")) {
			t.Errorf("egressProxy(%q) error %v; want one saying %q without the password", tt.give, err, tt.wantErr)
		}
	}
}

func TestTenantEgressProxyFlagTakesTenantEqualsURLOrDirect(t *testing.T) {
	if opts, err := tenantEgressProxies([]string{"acme=http://10.1.0.5:4750", "beta=direct"}); err != nil || len(opts) != 1 {
		t.Fatalf("valid entries: %d options, %v", len(opts), err)
	}
	for _, bad := range [][]string{{"acme"}, {"=http://p:1"}, {"acme=https://p:1"}, {"acme=direct", "acme=http://p:1"}, {"acme=http://u:s3cret@p"}} {
		if _, err := tenantEgressProxies(bad); err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("tenantEgressProxies(%q) = %v; want an error without the password", bad, err)
		}
	}
}
