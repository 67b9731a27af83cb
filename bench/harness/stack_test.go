package harness

import (
	"net"
	"strconv"
	"testing"
)

// TestFreePortsAreBelowTheEphemeralRangeAndNeverRepeat: ports an
// outgoing connection can take (the ephemeral range) are not handed out,
// nor one port twice, and each is bindable when returned.
func TestFreePortsAreBelowTheEphemeralRangeAndNeverRepeat(t *testing.T) {
	lo := ephemeralLow()
	seen := map[int]bool{}
	for range 50 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		if lo-portsBase >= 1000 && (p < portsBase || p >= lo) {
			t.Fatalf("port %d outside [%d, %d)", p, portsBase, lo)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d not bindable: %v", p, err)
		}
		ln.Close()
	}
}
