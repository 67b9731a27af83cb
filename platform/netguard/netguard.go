// Package netguard keeps webhook deliveries away from addresses a tenant
// must not reach through Hookline (SSRF): loopback, private, link-local,
// CGNAT, multicast and cloud-metadata ranges. The check runs on the
// resolved IP at dial time, so a hostname whose DNS answer changes after
// endpoint creation (DNS rebinding) is still refused.
package netguard

import (
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"github.com/hookline/hookline/platform/classify"
)

var denied = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),      // "this" network
	netip.MustParsePrefix("10.0.0.0/8"),     // private
	netip.MustParsePrefix("100.64.0.0/10"),  // CGNAT
	netip.MustParsePrefix("127.0.0.0/8"),    // loopback
	netip.MustParsePrefix("169.254.0.0/16"), // link-local, cloud metadata
	netip.MustParsePrefix("172.16.0.0/12"),  // private
	netip.MustParsePrefix("192.0.0.0/24"),   // IETF protocol assignments
	netip.MustParsePrefix("192.168.0.0/16"), // private
	netip.MustParsePrefix("198.18.0.0/15"),  // benchmarking
	netip.MustParsePrefix("224.0.0.0/4"),    // multicast
	netip.MustParsePrefix("240.0.0.0/4"),    // reserved, broadcast
	netip.MustParsePrefix("::/128"),         // unspecified
	netip.MustParsePrefix("::1/128"),        // loopback
	netip.MustParsePrefix("64:ff9b::/96"),   // NAT64 (embeds IPv4)
	netip.MustParsePrefix("fc00::/7"),       // unique local, incl. fd00:ec2::254
	netip.MustParsePrefix("fe80::/10"),      // link-local
	netip.MustParsePrefix("ff00::/8"),       // multicast
}

// Guard decides which destination IPs may be dialled. The zero Guard
// refuses every denied range. A Guard is immutable and safe for
// concurrent use.
type Guard struct {
	allowAll bool
	allow    []netip.Prefix
}

// New returns a Guard that also permits the allow CIDRs (for self-hosted
// receivers on private networks). With allowAll (dev mode) it permits
// every address.
func New(allowAll bool, allowCIDRs []string) (*Guard, error) {
	g := &Guard{allowAll: allowAll}
	for _, c := range allowCIDRs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("netguard: allowed CIDR %q: %w", c, err)
		}
		g.allow = append(g.allow, p.Masked())
	}
	return g, nil
}

// Check returns an error wrapping classify.ErrRefusedDestination when ip
// must not be dialled.
func (g *Guard) Check(ip netip.Addr) error {
	if g.allowAll {
		return nil
	}
	ip = ip.Unmap()
	for _, p := range g.allow {
		if p.Contains(ip) {
			return nil
		}
	}
	for _, p := range denied {
		if p.Contains(ip) {
			return fmt.Errorf("%s is in %s: %w", ip, p, classify.ErrRefusedDestination)
		}
	}
	return nil
}

// Control is a net.Dialer Control function that refuses denied
// destinations after DNS resolution, immediately before connecting.
func (g *Guard) Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("unexpected dial address %q: %w", address, classify.ErrRefusedDestination)
	}
	return g.Check(ap.Addr())
}

// CheckHost resolves host (a name or a literal IP) and checks every
// address, for validating an endpoint URL at creation time.
func (g *Guard) CheckHost(host string, lookup func(host string) ([]net.IP, error)) error {
	if g.allowAll {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return g.Check(ip)
	}
	ips, err := lookup(host)
	if err != nil {
		return fmt.Errorf("cannot resolve %q: %w", host, err)
	}
	for _, ip := range ips {
		a, ok := netip.AddrFromSlice(ip)
		if !ok {
			continue
		}
		if err := g.Check(a); err != nil {
			return err
		}
	}
	return nil
}
