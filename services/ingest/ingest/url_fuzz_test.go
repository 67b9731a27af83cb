package ingest

import (
	"context"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/hookline/hookline/platform/config"
)

// FuzzValidateURL feeds endpoint URLs, with whatever address their host
// resolves to, through ingest's validation. It must never panic, and a
// URL it accepts must be what the dispatcher can safely POST to: https,
// a host, no credentials or fragment, and a destination (literal or
// resolved) the SSRF guard allows.
func FuzzValidateURL(f *testing.F) {
	for _, s := range []string{
		"https://example.com/hooks", "http://example.com/", "https://127.0.0.1/", "https://[::1]:8443/",
		"https://[::ffff:169.254.169.254]/", "https://user:pw@example.com/", "https://example.com/#frag",
		"https://0x7f.1/", "https://127.1/", "https://2130706433/", "https://example.com%2f@127.0.0.1/",
		"https://rebind.example/", "javascript:alert(1)", "//example.com", "https:///path", "https://[fe80::1%25eth0]/",
	} {
		f.Add(s, []byte{93, 184, 216, 34})
	}
	f.Add("https://rebind.example/", []byte{169, 254, 169, 254})
	cfg, err := config.Defaults[Config]()
	if err != nil {
		f.Fatal(err)
	}
	cfg.APIKeys = []string{"t:hk_fuzz_5b0e8f2d7c41a9e6d3b8f0c2a7e4d1b9"}
	cfg.Secrets.InsecurePlaintext = true // no secret is written here
	f.Fuzz(func(t *testing.T, raw string, resolved []byte) {
		answer, ok := netip.AddrFromSlice(resolved)
		s, err := New(cfg, WithResolver(func(context.Context, string) ([]net.IP, error) {
			return []net.IP{net.IP(resolved)}, nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		if s.urls.validateURL(t.Context(), raw) != nil {
			return
		}
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("accepted %q, which does not parse: %v", raw, err)
		}
		if u.Scheme != "https" || u.Hostname() == "" || u.User != nil || u.Fragment != "" {
			t.Fatalf("accepted %q: scheme %q host %q user %v fragment %q", raw, u.Scheme, u.Hostname(), u.User, u.Fragment)
		}
		if lit, err := netip.ParseAddr(u.Hostname()); err == nil {
			if s.urls.guard.Base().Check(lit) != nil {
				t.Fatalf("accepted %q, a literal address the guard refuses", raw)
			}
		} else if ok && s.urls.guard.Base().Check(answer) != nil {
			t.Fatalf("accepted %q, whose host resolves to %s", raw, answer)
		}
		if strings.ContainsAny(u.Hostname(), " \t\r\n") {
			t.Fatalf("accepted %q with whitespace in its host", raw)
		}
	})
}
