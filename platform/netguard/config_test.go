package netguard_test

import (
	"flag"
	"net/netip"
	"testing"

	"github.com/hookline/hookline/platform/config"
	"github.com/hookline/hookline/platform/netguard"
)

// TestConfigFlagsReachThePolicy: each of the section's three flags, read
// by platform/config, reaches the Policy it builds.
func TestConfigFlagsReachThePolicy(t *testing.T) {
	var c netguard.Config
	args := []string{"--allow-cidrs", "10.9.0.0/16", "--tenant-allow-cidrs", "acme=10.1.0.0/16"}
	if err := config.Load(flag.NewFlagSet("t", flag.ContinueOnError), &c, args, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	p, err := c.Policy()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		tenant, give string
		ok           bool
	}{
		{"beta", "10.9.1.1", true},
		{"beta", "10.1.1.1", false},
		{"acme", "10.1.1.1", true},
		{"acme", "127.0.0.1", false},
	} {
		if err := p.For(tt.tenant).Check(netip.MustParseAddr(tt.give)); (err == nil) != tt.ok {
			t.Errorf("%s: Check(%s) = %v, want ok=%v", tt.tenant, tt.give, err, tt.ok)
		}
	}

	dev := netguard.Config{}
	if err := config.Load(flag.NewFlagSet("t", flag.ContinueOnError), &dev, []string{"--allow-private-destinations"}, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	if p, err = dev.Policy(); err != nil {
		t.Fatal(err)
	}
	if err := p.For("beta").Check(netip.MustParseAddr("127.0.0.1")); err != nil {
		t.Errorf("--allow-private-destinations: loopback refused: %v", err)
	}
}
