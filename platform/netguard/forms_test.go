package netguard

import "net/netip"

// spellings returns v4 in every IPv6 form that embeds it.
func spellings(v4 netip.Addr) []netip.Addr {
	a := v4.As4()
	at := func(prefix string, pos ...int) netip.Addr {
		b := netip.MustParseAddr(prefix).As16()
		for i, p := range pos {
			b[p] = a[i]
		}
		return netip.AddrFrom16(b)
	}
	teredo := netip.MustParseAddr("2001:0:4136:e378:8000:63bf::").As16()
	for i := range 4 {
		teredo[12+i] = a[i] ^ 0xff
	}
	return []netip.Addr{
		v4,
		netip.AddrFrom16(v4.As16()),           // ::ffff:a.b.c.d
		at("::", 12, 13, 14, 15),              // IPv4-compatible
		at("::ffff:0:0:0", 12, 13, 14, 15),    // SIIT
		at("64:ff9b::", 12, 13, 14, 15),       // NAT64 well-known
		at("64:ff9b:1::", 12, 13, 14, 15),     // NAT64 local-use, /96 layout
		at("64:ff9b:1::", 6, 7, 9, 10),        // /48 layout
		at("64:ff9b:1:ab00::", 7, 9, 10, 11),  // /56 layout
		at("64:ff9b:1:abcd::", 9, 10, 11, 12), // /64 layout
		at("2002::", 2, 3, 4, 5),              // 6to4
		netip.AddrFrom16(teredo),              // Teredo client
	}
}
