package netguard

import (
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/hookline/hookline/platform/classify"
)

func TestCheck(t *testing.T) {
	strict, _ := New(false, nil)
	allowed, _ := New(false, []string{"10.1.0.0/16"})
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
		{"loopback v6", strict, "::1", false},
		{"private 10", strict, "10.0.0.1", false},
		{"private 172", strict, "172.16.5.4", false},
		{"private 192", strict, "192.168.1.1", false},
		{"metadata", strict, "169.254.169.254", false},
		{"cgnat", strict, "100.64.0.1", false},
		{"multicast", strict, "224.0.0.1", false},
		{"unspecified", strict, "0.0.0.0", false},
		{"mapped loopback", strict, "::ffff:127.0.0.1", false},
		{"ula metadata", strict, "fd00:ec2::254", false},
		{"link-local v6", strict, "fe80::1", false},
		{"allowlisted", allowed, "10.1.2.3", true},
		{"outside allowlist", allowed, "10.2.0.1", false},
		{"dev allows loopback", dev, "127.0.0.1", true},
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
		})
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
	if err := g.CheckHost("evil.example", lookup); err == nil {
		t.Fatal("a name with a loopback answer was accepted")
	}
	if err := g.CheckHost("public.example", lookup); err != nil {
		t.Fatal(err)
	}
	if err := g.CheckHost("10.0.0.1", lookup); err == nil {
		t.Fatal("a literal private IP was accepted")
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
