package netguard

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/hookline/hookline/platform/classify"
)

// TestCheckEveryLiteralForm is the SSRF guard's table: every range it
// refuses, every spelling of an address (zoned, IPv4-mapped,
// IPv4-compatible, SIIT, NAT64, 6to4, Teredo), and metadata addresses
// refused in every mode.
func TestCheckEveryLiteralForm(t *testing.T) {
	strict, _ := New(false, nil)
	allowed, _ := New(false, []string{"10.1.0.0/16", "::ffff:192.168.7.0/120", "169.254.0.0/16", "fd12::/16"})
	dev, _ := New(true, nil)
	tests := []struct {
		name  string
		guard *Guard
		give  string
		ok    bool
	}{
		{"public v4", strict, "93.184.216.34", true},
		{"public v6", strict, "2606:2800:220:1::1", true},
		{"loopback", strict, "127.0.0.1", false},
		{"loopback high", strict, "127.255.255.254", false},
		{"loopback v6", strict, "::1", false},
		{"loopback v6 zoned", strict, "::1%lo", false},
		{"private 10", strict, "10.0.0.1", false},
		{"private 172", strict, "172.16.5.4", false},
		{"private 192", strict, "192.168.1.1", false},
		{"this network", strict, "0.1.2.3", false},
		{"unspecified", strict, "0.0.0.0", false},
		{"unspecified v6", strict, "::", false},
		{"link-local", strict, "169.254.1.1", false},
		{"cgnat", strict, "100.64.0.1", false},
		{"ietf protocol assignments", strict, "192.0.0.8", false},
		{"pcp anycast is global", strict, "192.0.0.9", true},
		{"test-net-1", strict, "192.0.2.1", false},
		{"6to4 relay anycast", strict, "192.88.99.1", false},
		{"benchmarking", strict, "198.18.0.1", false},
		{"benchmarking upper", strict, "198.19.255.255", false},
		{"test-net-2", strict, "198.51.100.7", false},
		{"test-net-3", strict, "203.0.113.9", false},
		{"multicast", strict, "224.0.0.1", false},
		{"multicast upper", strict, "239.255.255.250", false},
		{"reserved", strict, "240.0.0.1", false},
		{"broadcast", strict, "255.255.255.255", false},
		{"mapped loopback", strict, "::ffff:127.0.0.1", false},
		{"mapped loopback zoned", strict, "::ffff:127.0.0.1%eth0", false},
		{"mapped public", strict, "::ffff:93.184.216.34", true},
		{"compatible loopback", strict, "::127.0.0.1", false},
		{"compatible public is not unicast", strict, "::93.184.216.34", false},
		{"siit loopback", strict, "::ffff:0:127.0.0.1", false},
		{"nat64 loopback", strict, "64:ff9b::127.0.0.1", false},
		{"nat64 metadata", strict, "64:ff9b::a9fe:a9fe", false},
		{"nat64 public", strict, "64:ff9b::93.184.216.34", true},
		{"nat64 local-use", strict, "64:ff9b:1::93.184.216.34", false},
		{"nat64 local-use /48 layout", strict, "64:ff9b:1:7f00:1::", false},
		{"6to4 loopback", strict, "2002:7f00:1::", false},
		{"6to4 private", strict, "2002:a00:1::1", false},
		{"6to4 public", strict, "2002:5db8:d822::1", true},
		{"teredo loopback client", strict, "2001:0:4136:e378:8000:63bf:80ff:fffe", false},
		{"teredo private server", strict, "2001:0:a00:1:8000:63bf:a247:27dd", false},
		{"teredo public", strict, "2001:0:4136:e378:8000:63bf:a247:27dd", true},
		{"ietf v6 assignments", strict, "2001:2::1", false},
		{"orchid deprecated", strict, "2001:10::1", false},
		{"as112-v6 is global", strict, "2001:4:112::1", true},
		{"documentation v6", strict, "2001:db8::1", false},
		{"documentation 3fff", strict, "3fff::1", false},
		{"discard-only", strict, "100::1", false},
		{"srv6 sids", strict, "5f00::1", false},
		{"unique local", strict, "fd12:3456::1", false},
		{"ula metadata", strict, "fd00:ec2::254", false},
		{"ula metadata zoned", strict, "fd00:ec2::254%eth0", false},
		{"site-local", strict, "fec0::1", false},
		{"link-local v6", strict, "fe80::1", false},
		{"link-local v6 zoned", strict, "fe80::1%eth0", false},
		{"link-local v6 numeric zone", strict, "fe80::a9fe:a9fe%1", false},
		{"multicast v6", strict, "ff02::1", false},
		{"multicast v6 zoned", strict, "ff02::1%eth0", false},
		{"allowlisted", allowed, "10.1.2.3", true},
		{"allowlisted mapped", allowed, "::ffff:10.1.2.3", true},
		{"allowlisted via nat64", allowed, "64:ff9b::10.1.2.3", true},
		{"allowlisted by a mapped CIDR", allowed, "192.168.7.9", true},
		{"outside allowlist", allowed, "10.2.0.1", false},
		{"allowlisted zoned", allowed, "fd12::1%eth0", true},
		{"allowlist never admits metadata", allowed, "169.254.169.254", false},
		{"allowlist admits the rest of its range", allowed, "169.254.1.1", true},
		{"dev allows loopback", dev, "127.0.0.1", true},
		{"dev allows link-local zoned", dev, "fe80::1%eth0", true},
		{"dev refuses metadata", dev, "169.254.169.254", false},
		{"dev refuses ecs metadata", dev, "169.254.170.2", false},
		{"dev refuses aws v6 metadata", dev, "fd00:ec2::254", false},
		{"dev refuses aws v6 metadata zoned", dev, "fd00:ec2::254%eth0", false},
		{"dev refuses gcp v6 metadata", dev, "fd20:ce::254", false},
		{"dev refuses alibaba metadata", dev, "100.100.100.200", false},
		{"dev refuses oracle metadata", dev, "192.0.0.192", false},
		{"dev refuses azure wireserver", dev, "168.63.129.16", false},
		{"dev refuses mapped metadata", dev, "::ffff:169.254.169.254", false},
		{"dev refuses nat64 metadata", dev, "64:ff9b::169.254.169.254", false},
		{"dev refuses 6to4 metadata", dev, "2002:a9fe:a9fe::", false},
		{"dev refuses teredo metadata client", dev, "2001:0:4136:e378:8000:63bf:5601:5601", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.guard.Check(netip.MustParseAddr(tt.give))
			if (err == nil) != tt.ok {
				t.Fatalf("Check(%s) = %v, want ok=%v", tt.give, err, tt.ok)
			}
			if err != nil && !errors.Is(err, classify.ErrRefusedDestination) {
				t.Fatalf("error %v does not wrap ErrRefusedDestination", err)
			}
			if err != nil && strings.Contains(err.Error(), netip.MustParseAddr(tt.give).WithZone("").Unmap().String()) {
				t.Fatalf("error %q names the address", err)
			}
		})
	}
}

func TestEveryFormOfAnInternalAddressIsRefused(t *testing.T) {
	strict, _ := New(false, nil)
	for _, v4 := range []string{"127.0.0.1", "10.9.8.7", "169.254.169.254", "192.0.2.55", "198.18.3.4", "224.1.1.1", "255.255.255.255"} {
		for _, form := range spellings(netip.MustParseAddr(v4)) {
			for _, a := range []netip.Addr{form, form.WithZone("eth0")} {
				if !a.Is6() && a.Zone() != "" {
					continue
				}
				if strict.Check(a) == nil {
					t.Errorf("%s (embedding %s) was allowed", a, v4)
				}
			}
		}
	}
}

func TestCheckHostResolvesNames(t *testing.T) {
	g, _ := New(false, nil)
	lookup := func(host string) ([]net.IP, error) {
		return map[string][]net.IP{
			"evil.example":   {net.ParseIP("93.184.216.34"), net.ParseIP("127.0.0.1")},
			"public.example": {net.ParseIP("93.184.216.34")},
		}[host], nil
	}
	err := g.CheckHost("evil.example", lookup)
	if err == nil {
		t.Fatal("a name with a loopback answer was accepted")
	}
	if strings.Contains(err.Error(), "127.0.0.1") || err.Error() != `cannot resolve "evil.example" to an allowed address` {
		t.Fatalf("refusal %q: want it to say only that the name does not resolve to an allowed address", err)
	}
	if err := g.CheckHost("public.example", lookup); err != nil {
		t.Fatal(err)
	}
	if err := g.CheckHost("10.0.0.1", lookup); err == nil {
		t.Fatal("a literal private IP was accepted")
	}
}

// TestAFailedAndAPrivateResolutionReadAlike: a name that does not
// resolve, resolves to nothing, or resolves (even partly) to an internal
// address gets one answer naming only the host, so creating endpoints
// cannot tell whether an internal name exists, and the resolver's text
// (its address, the pod's address and port) never reaches the caller.
func TestAFailedAndAPrivateResolutionReadAlike(t *testing.T) {
	g, _ := New(false, nil)
	answers := map[string]func() ([]net.IP, error){
		"kafka.internal": func() ([]net.IP, error) { return []net.IP{net.ParseIP("10.0.0.7")}, nil },
		"mixed.example":  func() ([]net.IP, error) { return []net.IP{net.ParseIP("93.184.216.34"), net.ParseIP("10.0.0.7")}, nil },
		"empty.example":  func() ([]net.IP, error) { return nil, nil },
		"nxdomain.internal": func() ([]net.IP, error) {
			return nil, &net.DNSError{Err: "no such host", Name: "nxdomain.internal", Server: "10.96.0.10:53", IsNotFound: true}
		},
		"slow.internal": func() ([]net.IP, error) {
			return nil, &net.DNSError{Err: "read udp 10.244.1.5:41234->10.96.0.10:53: i/o timeout", Name: "slow.internal", Server: "10.96.0.10:53", IsTimeout: true}
		},
		"servfail.internal": func() ([]net.IP, error) {
			return nil, &net.DNSError{Err: "server misbehaving", Name: "servfail.internal", Server: "10.96.0.10:53"}
		},
	}
	for host, answer := range answers {
		err := g.CheckHost(host, func(string) ([]net.IP, error) { return answer() })
		if err == nil {
			t.Fatalf("%s: accepted", host)
		}
		if want := `cannot resolve "` + host + `" to an allowed address`; err.Error() != want {
			t.Errorf("%s: %q, want %q", host, err, want)
		}
		for _, leak := range []string{"10.", ":53", "41234", "no such host", "timeout", "misbehaving", "private"} {
			if strings.Contains(err.Error(), leak) {
				t.Errorf("%s: %q names %q", host, err, leak)
			}
		}
	}
}

func TestControlRefusesAtDialTime(t *testing.T) {
	g, _ := New(false, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := net.Dialer{Control: g.Control}
	_, err = d.DialContext(t.Context(), "tcp", ln.Addr().String())
	if !errors.Is(err, classify.ErrRefusedDestination) {
		t.Fatalf("dial to loopback: got %v, want ErrRefusedDestination", err)
	}
}

// A tenant's own CIDRs widen its guard only; another tenant, and the
// metadata addresses, stay refused.
func TestTenantAllowListAppliesToThatTenantOnly(t *testing.T) {
	p, err := NewPolicy(false, []string{"10.9.0.0/16"}, []string{"acme=10.1.0.0/16", "acme=fd12::/16", "beta=192.168.5.0/24"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		tenant, give string
		ok           bool
	}{
		{"acme", "10.1.2.3", true},
		{"acme", "fd12::7%eth0", true},
		{"acme", "10.9.1.1", true}, // the global list too
		{"acme", "192.168.5.5", false},
		{"beta", "192.168.5.5", true},
		{"beta", "10.1.2.3", false},
		{"other", "10.1.2.3", false},
		{"other", "10.9.1.1", true},
		{"acme", "169.254.169.254", false},
	}
	for _, tt := range tests {
		if err := p.For(tt.tenant).Check(netip.MustParseAddr(tt.give)); (err == nil) != tt.ok {
			t.Errorf("tenant %s, %s: %v, want ok=%v", tt.tenant, tt.give, err, tt.ok)
		}
	}
	for _, bad := range []string{"10.0.0.0/8", "=10.0.0.0/8", "acme=nonsense", "acme=fe80::/10%eth0"} {
		if _, err := NewPolicy(false, nil, []string{bad}); err == nil {
			t.Errorf("NewPolicy accepted %q", bad)
		}
	}
}
