// Package netguard keeps webhook deliveries away from addresses a tenant
// must not reach through Hookline (SSRF). The check runs on the resolved
// IP at dial time, so a hostname whose DNS answer changes after endpoint
// creation (DNS rebinding) is still refused, and on the literal or
// resolved host when an endpoint URL is set.
//
// The check is total: an address is first normalised (zone stripped,
// IPv4-mapped form unmapped) and every IPv4 address it embeds is
// extracted (IPv4-compatible ::a.b.c.d, SIIT ::ffff:0:a.b.c.d, NAT64
// 64:ff9b::/96 and 64:ff9b:1::/48, 6to4 2002::/16, Teredo 2001::/32 —
// server and XOR'd client); the address and each embedded address must
// all pass. Refused: every range of the IANA IPv4 and IPv6
// special-purpose registries that is not globally reachable (loopback,
// private, link-local, CGNAT, TEST-NETs, benchmarking, documentation,
// discard, ORCHID, …), multicast, broadcast, unspecified, and every IPv6
// address outside 2000::/3 (the only block allocated as global unicast)
// but the NAT64 prefixes. Cloud metadata addresses are refused in every
// mode, allow-all (dev) and allow-lists included.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"

	"github.com/hookline/hookline/platform/classify"
)

// errInternal is what every refusal says: never which address a name
// resolved to, nor which range it fell in.
var errInternal = fmt.Errorf("a private/internal address: %w", classify.ErrRefusedDestination)

// metadata are cloud instance-metadata and platform-agent addresses,
// refused in every mode: credentials live behind them.
var metadata = prefixes(
	"169.254.169.254/32", // AWS, GCP, Azure, OpenStack, DigitalOcean, … IMDS
	"169.254.169.253/32", // AWS VPC DNS
	"169.254.169.123/32", // AWS time sync
	"169.254.170.2/32",   // AWS ECS task metadata and credentials
	"169.254.170.23/32",  // AWS EKS pod identity agent
	"169.254.0.23/32",    // Tencent Cloud metadata
	"100.100.100.200/32", // Alibaba Cloud metadata
	"192.0.0.192/32",     // Oracle Cloud metadata
	"168.63.129.16/32",   // Azure WireServer and host agent
	"fd00:ec2::254/128",  // AWS IMDS over IPv6
	"fd00:ec2::253/128",  // AWS VPC DNS over IPv6
	"fd00:ec2::23/128",   // AWS EKS pod identity agent over IPv6
	"fd20:ce::254/128",   // GCP metadata over IPv6
)

// deniedV4 are the IPv4 ranges of the IANA special-purpose registry that
// are not globally reachable, plus multicast and the reserved block.
var deniedV4 = prefixes(
	"0.0.0.0/8",       // "this" network, 0.0.0.0 unspecified
	"10.0.0.0/8",      // private
	"100.64.0.0/10",   // shared address space (CGNAT)
	"127.0.0.0/8",     // loopback
	"169.254.0.0/16",  // link-local
	"172.16.0.0/12",   // private
	"192.0.0.0/24",    // IETF protocol assignments (but .9 and .10 below)
	"192.0.2.0/24",    // TEST-NET-1
	"192.88.99.0/24",  // deprecated 6to4 relay anycast
	"192.168.0.0/16",  // private
	"198.18.0.0/15",   // benchmarking
	"198.51.100.0/24", // TEST-NET-2
	"203.0.113.0/24",  // TEST-NET-3
	"224.0.0.0/4",     // multicast
	"240.0.0.0/4",     // reserved, 255.255.255.255 limited broadcast
)

// deniedV6 are the IPv6 ranges inside 2000::/3 that are not globally
// reachable (everything outside 2000::/3 is refused but reachableV6).
var deniedV6 = prefixes(
	"2001::/23",     // IETF protocol assignments (but the exceptions below)
	"2001:db8::/32", // documentation
	"3fff::/20",     // documentation
)

// reachableV4 and reachableV6 are globally reachable blocks inside a
// denied range, judged by what they embed if anything.
var (
	reachableV4 = prefixes("192.0.0.9/32", "192.0.0.10/32") // PCP and TURN anycast
	reachableV6 = prefixes(
		"64:ff9b::/96",    // NAT64 well-known prefix: judged by the IPv4 it embeds
		"2001::/32",       // Teredo: judged by the server and client it embeds
		"2001:1::1/128",   // PCP anycast
		"2001:1::2/128",   // TURN anycast
		"2001:1::3/128",   // DNS-SD SRP anycast
		"2001:3::/32",     // AMT
		"2001:4:112::/48", // AS112-v6
		"2001:20::/28",    // ORCHIDv2
		"2001:30::/28",    // drone remote ID
	)
	globalUnicast = netip.MustParsePrefix("2000::/3")
)

// Embedding prefixes.
var (
	siit       = netip.MustParsePrefix("::ffff:0:0:0/96")
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour  = netip.MustParsePrefix("2002::/16")
	teredo     = netip.MustParsePrefix("2001::/32")
	compatible = netip.MustParsePrefix("::/96")
)

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

func within(ps []netip.Prefix, ip netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Normalize returns ip without its zone and, for an IPv4-mapped IPv6
// address, as the IPv4 address it maps: the address a dial reaches.
// netip.Prefix.Contains is false for every zoned address, so the check
// must never see one.
func Normalize(ip netip.Addr) netip.Addr {
	return ip.WithZone("").Unmap()
}

// Embedded returns the IPv4 addresses a normalised IPv6 address carries
// in a form that makes a dial (or a translator on its path) reach them:
// IPv4-compatible, SIIT, NAT64 (64:ff9b::/96; 64:ff9b:1::/48 in each
// RFC 6052 layout whose u-octet and suffix are zero), 6to4, and Teredo
// (server, and the client XOR'd with 0xffffffff).
func Embedded(ip netip.Addr) []netip.Addr {
	if !ip.Is6() {
		return nil
	}
	b := ip.As16()
	v4 := func(i, j, k, l int) netip.Addr { return netip.AddrFrom4([4]byte{b[i], b[j], b[k], b[l]}) }
	zero := func(from, to int) bool {
		for _, x := range b[from:to] {
			if x != 0 {
				return false
			}
		}
		return true
	}
	switch {
	case compatible.Contains(ip), siit.Contains(ip), nat64.Contains(ip):
		return []netip.Addr{v4(12, 13, 14, 15)}
	case nat64Local.Contains(ip):
		var out []netip.Addr
		if zero(6, 12) { // /96
			out = append(out, v4(12, 13, 14, 15))
		}
		if b[8] == 0 {
			if zero(11, 16) { // /48
				out = append(out, v4(6, 7, 9, 10))
			}
			if zero(12, 16) { // /56
				out = append(out, v4(7, 9, 10, 11))
			}
			if zero(13, 16) { // /64
				out = append(out, v4(9, 10, 11, 12))
			}
		}
		return out
	case sixToFour.Contains(ip):
		return []netip.Addr{v4(2, 3, 4, 5)}
	case teredo.Contains(ip):
		client := netip.AddrFrom4([4]byte{b[12] ^ 0xff, b[13] ^ 0xff, b[14] ^ 0xff, b[15] ^ 0xff})
		return []netip.Addr{v4(4, 5, 6, 7), client}
	}
	return nil
}

// IsMetadata reports whether ip, or an IPv4 address it embeds, is a
// cloud metadata address.
func IsMetadata(ip netip.Addr) bool {
	ip = Normalize(ip)
	if within(metadata, ip) {
		return true
	}
	for _, e := range Embedded(ip) {
		if within(metadata, e) {
			return true
		}
	}
	return false
}

// internal reports whether a normalised ip, taken on its own (not what
// it embeds), is in a range that is not globally reachable.
func internal(ip netip.Addr) bool {
	if ip.Is4() {
		return within(deniedV4, ip) && !within(reachableV4, ip)
	}
	if within(reachableV6, ip) {
		return false
	}
	return !globalUnicast.Contains(ip) || within(deniedV6, ip)
}

// Guard decides which destination IPs may be dialled. The zero Guard
// refuses every denied range. A Guard is immutable and safe for
// concurrent use.
type Guard struct {
	allowAll bool
	allow    []netip.Prefix
}

// New returns a Guard that also permits the allow CIDRs (for self-hosted
// receivers on private networks). With allowAll (dev mode,
// --allow-private-destinations) it permits every address but the cloud
// metadata ones.
func New(allowAll bool, allowCIDRs []string) (*Guard, error) {
	g := &Guard{allowAll: allowAll}
	for _, c := range allowCIDRs {
		p, err := parseCIDR(c)
		if err != nil {
			return nil, err
		}
		g.allow = append(g.allow, p)
	}
	return g, nil
}

func parseCIDR(c string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(c))
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("netguard: allowed CIDR %q: %w", c, err)
	}
	if p.Addr().Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("netguard: allowed CIDR %q: has a zone", c)
	}
	if p.Addr().Is4In6() {
		// ::ffff:10.0.0.0/104 means 10.0.0.0/8: addresses are unmapped
		// before they are compared.
		if p.Bits() < 96 {
			return netip.Prefix{}, fmt.Errorf("netguard: allowed CIDR %q: an IPv4-mapped prefix must be /96 or longer", c)
		}
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p.Masked(), nil
}

// with returns a Guard permitting g's CIDRs and more.
func (g *Guard) with(more []netip.Prefix) *Guard {
	return &Guard{allowAll: g.allowAll, allow: append(append([]netip.Prefix(nil), g.allow...), more...)}
}

// Check returns an error wrapping classify.ErrRefusedDestination when ip
// must not be dialled. The error does not name ip.
func (g *Guard) Check(ip netip.Addr) error {
	if !ip.IsValid() {
		return errInternal
	}
	ip = Normalize(ip)
	if IsMetadata(ip) {
		return errInternal
	}
	if g.allowAll {
		return nil
	}
	for _, a := range append([]netip.Addr{ip}, Embedded(ip)...) {
		if internal(a) && !within(g.allow, a) {
			return errInternal
		}
	}
	return nil
}

// Control is a net.Dialer Control function that refuses denied
// destinations after DNS resolution, immediately before connecting.
func (g *Guard) Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("unexpected dial address: %w", classify.ErrRefusedDestination)
	}
	return g.Check(ap.Addr())
}

// CheckHost resolves host (a name or a literal IP) and checks every
// address, for validating an endpoint URL at creation time. A refusal
// says the host "is" or "resolves to" a private/internal address, never
// which. An allow-all Guard checks literals only (names are checked when
// dialled), so dev mode does not wait on DNS.
func (g *Guard) CheckHost(host string, lookup func(host string) ([]net.IP, error)) error {
	if ip, err := netip.ParseAddr(host); err == nil {
		if err := g.Check(ip); err != nil {
			return fmt.Errorf("%s is %w", host, err)
		}
		return nil
	}
	if g.allowAll {
		return nil
	}
	ips, err := lookup(host)
	if err != nil {
		u := &unresolvable{host: host}
		// The caller's own deadline stays visible (ingest answers it
		// UNAVAILABLE, retry); the resolver's text never is.
		if cerr := contextError(err); cerr != nil {
			u.cause = cerr
		}
		return u
	}
	if len(ips) == 0 {
		return Unresolvable(host)
	}
	for _, ip := range ips {
		a, ok := netip.AddrFromSlice(ip)
		if err := g.Check(a); !ok || err != nil {
			return Unresolvable(host)
		}
	}
	return nil
}

// ErrUnresolvable marks a host name that did not resolve to an address
// the guard admits. It is not a refused destination: it classifies as
// a DNS failure (transient, R-CLASS), like the failed lookups it must be
// indistinguishable from.
var ErrUnresolvable = errors.New("cannot resolve")

// Unresolvable is the one answer for a host name that does not resolve
// (not found, timed out, the server failed), resolves to no address, or
// resolves (even partly) to an address the guard refuses: "cannot
// resolve "host" to an allowed address", wrapping ErrUnresolvable. One
// answer for all of them, so an endpoint URL is not a probe of which
// internal names exist; and never the resolver's text, which names the
// resolver's address and the pod's address and port.
func Unresolvable(host string) error { return &unresolvable{host: host} }

type unresolvable struct {
	host  string
	cause error // the caller's context error, if that ended the lookup
}

func (e *unresolvable) Error() string {
	return fmt.Sprintf("cannot resolve %q to an allowed address", e.host)
}

func (e *unresolvable) Unwrap() []error {
	if e.cause != nil {
		return []error{ErrUnresolvable, e.cause}
	}
	return []error{ErrUnresolvable}
}

// contextError returns the context error err wraps, or nil.
func contextError(err error) error {
	for _, c := range []error{context.DeadlineExceeded, context.Canceled} {
		if errors.Is(err, c) {
			return c
		}
	}
	return nil
}
