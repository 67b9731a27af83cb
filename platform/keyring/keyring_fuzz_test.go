package keyring

import (
	"testing"
	"time"
)

// FuzzParse: a key file never panics the parser, and whatever parses
// seals and opens.
func FuzzParse(f *testing.F) {
	f.Add([]byte(NewKeyLine(time.Unix(0, 0))))
	f.Add([]byte("# c\n\nk1 AAAA\n"))
	f.Add([]byte(NewKeyLine(time.Unix(0, 0)) + "\n" + NewKeyLine(time.Unix(1, 0))))
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := Parse(data)
		if err != nil {
			return
		}
		es, err := k.Seal("t", "ep", "whsec_x", time.Unix(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := k.Open("t", "ep", es); err != nil || got != "whsec_x" {
			t.Fatalf("Open = %q, %v", got, err)
		}
	})
}
