package sign

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzSignVerifyRoundTrip checks what a receiver relies on: a signature
// made for (id, timestamp, body) verifies, by either key during a
// rotation, and does not verify for another body or id.
func FuzzSignVerifyRoundTrip(f *testing.F) {
	f.Add("evt_1", []byte(`{"a":1}`), int64(1_700_000_000))
	f.Add(strings.Repeat("x", 300), []byte(nil), int64(0))
	f.Add("evt.with.dots", []byte("a.b.c"), int64(-1))
	current, previous := GenerateSecret(), GenerateSecret()
	both, err := NewSigner(current, previous)
	if err != nil {
		f.Fatal(err)
	}
	onlyCurrent, _ := NewSigner(current)
	onlyPrevious, _ := NewSigner(previous)
	f.Fuzz(func(t *testing.T, id string, body []byte, unix int64) {
		if id == "" {
			return
		}
		ts := time.Unix(unix%(1<<40), 0)
		sig := both.Sign(id, ts, body)
		tsStr := strconv.FormatInt(ts.Unix(), 10)
		for _, v := range []*Signer{both, onlyCurrent, onlyPrevious} {
			if err := v.Verify(id, tsStr, sig, body, ts, DefaultTolerance); err != nil {
				t.Fatalf("Verify(%q, %s) of its own signature: %v", id, tsStr, err)
			}
		}
		if err := both.Verify(id, tsStr, sig, append(body[:len(body):len(body)], 'x'), ts, DefaultTolerance); err == nil {
			t.Fatal("a signature verified for a changed body")
		}
		if err := both.Verify(id+"x", tsStr, sig, body, ts, DefaultTolerance); err == nil {
			t.Fatal("a signature verified for another id")
		}
		if err := both.Verify(id, tsStr, sig, body, ts.Add(DefaultTolerance+time.Second), DefaultTolerance); err == nil {
			t.Fatal("a signature verified outside the tolerance")
		}
	})
}

// FuzzParseSecret checks that a secret is accepted only in its documented
// shape, and that an accepted one makes a working Signer.
func FuzzParseSecret(f *testing.F) {
	f.Add(GenerateSecret())
	f.Add("whsec_")
	f.Add("whsec_c2hvcnQ=")
	f.Add("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	f.Fuzz(func(t *testing.T, s string) {
		key, err := ParseSecret(s)
		if err != nil {
			return
		}
		if !strings.HasPrefix(s, SecretPrefix) || len(key) < minKeyLen || len(key) > maxKeyLen {
			t.Fatalf("ParseSecret(%q) accepted a %d-byte key", s, len(key))
		}
		if _, err := NewSigner(s); err != nil {
			t.Fatalf("NewSigner(%q) refused a secret ParseSecret accepted: %v", s, err)
		}
	})
}
