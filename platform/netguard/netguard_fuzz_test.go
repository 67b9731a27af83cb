package netguard

import (
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/hookline/hookline/platform/classify"
)

// FuzzControl feeds the dial address the dialer hands to Control. Control
// must never panic, must refuse an address it cannot parse, and must agree
// with Check on an address it can: the SSRF guard has no parse-only hole.
func FuzzControl(f *testing.F) {
	for _, s := range []string{"127.0.0.1:80", "[::1]:443", "[::ffff:127.0.0.1]:80", "[::ffff:7f00:1]:80",
		"169.254.169.254:80", "[fd00:ec2::254]:80", "93.184.216.34:443", "[64:ff9b::a9fe:a9fe]:80",
		"0.0.0.0:1", "[fe80::1%eth0]:80", "localhost:80", "", ":80", "1.2.3.4"} {
		f.Add(s)
	}
	g := &Guard{}
	open, _ := New(true, nil)
	f.Fuzz(func(t *testing.T, address string) {
		err := g.Control("tcp", address, nil)
		ap, perr := netip.ParseAddrPort(address)
		if perr == nil && (open.Control("tcp", address, nil) != nil) != IsMetadata(ap.Addr()) {
			t.Fatalf("allow-all guard: %q refused=%v, want refused only for metadata", address, open.Control("tcp", address, nil) != nil)
		}
		if perr != nil {
			if !errors.Is(err, classify.ErrRefusedDestination) {
				t.Fatalf("Control(%q) = %v for an unparsable address, want refused", address, err)
			}
			return
		}
		if (err == nil) != (g.Check(ap.Addr()) == nil) {
			t.Fatalf("Control(%q) = %v disagrees with Check", address, err)
		}
	})
}

// FuzzCheckIPv4Forms checks that every spelling of one IPv4 address (plain,
// IPv4-mapped IPv6, with a zone) gets the same verdict, and that loopback,
// private, link-local and metadata addresses are always refused.
func FuzzCheckIPv4Forms(f *testing.F) {
	f.Add([]byte{127, 0, 0, 1})
	f.Add([]byte{169, 254, 169, 254})
	f.Add([]byte{10, 1, 2, 3})
	f.Add([]byte{93, 184, 216, 34})
	g := &Guard{}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 4 {
			return
		}
		v4 := netip.AddrFrom4([4]byte(b[:4]))
		mapped := netip.AddrFrom16(v4.As16())
		if (g.Check(v4) == nil) != (g.Check(mapped) == nil) {
			t.Fatalf("%s and %s get different verdicts", v4, mapped)
		}
		if v4.IsLoopback() || v4.IsPrivate() || v4.IsLinkLocalUnicast() || v4.IsUnspecified() || v4.IsMulticast() {
			if g.Check(v4) == nil || g.Check(mapped) == nil {
				t.Fatalf("%s was allowed", v4)
			}
		}
	})
}

// FuzzCheckHost feeds a URL host and the addresses DNS answers for it.
// CheckHost must never panic; a literal IP is judged by Check alone, and a
// name is refused if any address it resolves to is refused.
func FuzzCheckHost(f *testing.F) {
	f.Add("example.com", []byte{93, 184, 216, 34})
	f.Add("rebind.example", []byte{127, 0, 0, 1})
	f.Add("::ffff:10.0.0.1", []byte(nil))
	f.Add("169.254.169.254", []byte{1, 1, 1, 1})
	f.Add("metadata", []byte(net.ParseIP("fd00:ec2::254")))
	g := &Guard{}
	f.Fuzz(func(t *testing.T, host string, ip []byte) {
		called := false
		err := g.CheckHost(host, func(string) ([]net.IP, error) {
			called = true
			return []net.IP{ip}, nil
		})
		if lit, perr := netip.ParseAddr(host); perr == nil {
			if called {
				t.Fatalf("CheckHost(%q) resolved a literal IP", host)
			}
			if (err == nil) != (g.Check(lit) == nil) {
				t.Fatalf("CheckHost(%q) = %v disagrees with Check", host, err)
			}
			return
		}
		if a, ok := netip.AddrFromSlice(ip); ok && g.Check(a) != nil && err == nil {
			t.Fatalf("CheckHost(%q) allowed a name that resolves to %s", host, a)
		}
	})
}

// FuzzEmbeddedForms spells one IPv4 address in every form that embeds
// it (IPv4-mapped, IPv4-compatible, SIIT, NAT64 well-known and local-use
// in each layout, 6to4, Teredo client), each also with a zone. An
// internal IPv4 address is refused in every spelling by the strict guard,
// a metadata address in every spelling by the allow-all guard too, and a
// zone never changes a verdict.
func FuzzEmbeddedForms(f *testing.F) {
	f.Add([]byte{127, 0, 0, 1}, "eth0")
	f.Add([]byte{169, 254, 169, 254}, "1")
	f.Add([]byte{100, 100, 100, 200}, "")
	f.Add([]byte{10, 0, 0, 1}, "lo")
	f.Add([]byte{93, 184, 216, 34}, "eth0")
	f.Add([]byte{192, 0, 2, 1}, "x")
	strict := &Guard{}
	open, _ := New(true, nil)
	f.Fuzz(func(t *testing.T, b []byte, zone string) {
		if len(b) < 4 {
			return
		}
		v4 := netip.AddrFrom4([4]byte(b[:4]))
		for _, form := range spellings(v4) {
			zoned := form
			if form.Is6() && zone != "" {
				zoned = form.WithZone(zone)
			}
			if (strict.Check(form) == nil) != (strict.Check(zoned) == nil) || (open.Check(form) == nil) != (open.Check(zoned) == nil) {
				t.Fatalf("%s and %s get different verdicts", form, zoned)
			}
			if strict.Check(v4) != nil && strict.Check(zoned) == nil {
				t.Fatalf("%s is refused but %s, which embeds it, is allowed", v4, zoned)
			}
			if IsMetadata(v4) && open.Check(zoned) == nil {
				t.Fatalf("metadata %s allowed by the allow-all guard as %s", v4, zoned)
			}
		}
	})
}
