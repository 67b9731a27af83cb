package dispatcher

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/hookline/hookline/services/dispatcher/attempt"
)

// egressProxy returns the attempt option of --egress-proxy (none when
// it is empty).
func egressProxy(raw string) ([]attempt.Option, error) {
	if raw == "" {
		return nil, nil
	}
	u, err := proxyURL(raw)
	if err != nil {
		return nil, err
	}
	return []attempt.Option{attempt.WithEgressProxy(u)}, nil
}

// proxyURL parses an egress proxy's http://[user:password@]host:port.
// An error never holds the password.
func proxyURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("not a URL: give http://[user:password@]host:port")
	}
	if u.Scheme != "http" || u.Hostname() == "" || u.Port() == "" || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("%q: give http://[user:password@]host:port", u.Redacted())
	}
	return u, nil
}

// tenantEgressProxies returns the attempt option of
// --tenant-egress-proxy's tenant=URL entries ("direct": no proxy); none
// when it is empty.
func tenantEgressProxies(entries []string) ([]attempt.Option, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	m := map[string]*url.URL{}
	for _, e := range entries {
		tenant, raw, ok := strings.Cut(e, "=")
		if !ok || tenant == "" || raw == "" {
			return nil, fmt.Errorf("%q: give tenant=http://host:port or tenant=direct", e)
		}
		if _, dup := m[tenant]; dup {
			return nil, fmt.Errorf("tenant %q appears twice", tenant)
		}
		m[tenant] = nil
		if raw == "direct" {
			continue
		}
		u, err := proxyURL(raw)
		if err != nil {
			return nil, fmt.Errorf("tenant %s: %w", tenant, err)
		}
		m[tenant] = u
	}
	return []attempt.Option{attempt.WithTenantEgressProxies(m)}, nil
}
