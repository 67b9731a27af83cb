package sign

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

func TestSignaturesVerifyWithTheReferenceLibrary(t *testing.T) {
	current, old := GenerateSecret(), GenerateSecret()
	body := []byte(`{"type":"invoice.paid","amount":42}`)
	ts := time.Now()
	tests := []struct {
		name    string
		secrets []string
		verify  string
	}{
		{"single secret", []string{current}, current},
		{"rotation verifies with the new secret", []string{current, old}, current},
		{"rotation verifies with the old secret", []string{current, old}, old},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewSigner(tt.secrets...)
			if err != nil {
				t.Fatal(err)
			}
			sig := s.Sign("evt_1", ts, body)
			if n := len(strings.Fields(sig)); n != len(tt.secrets) {
				t.Fatalf("got %d signatures, want %d: %q", n, len(tt.secrets), sig)
			}
			wh, err := standardwebhooks.NewWebhook(tt.verify)
			if err != nil {
				t.Fatal(err)
			}
			h := http.Header{}
			h.Set(HeaderID, "evt_1")
			h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
			h.Set(HeaderSignature, sig)
			if err := wh.Verify(body, h); err != nil {
				t.Fatalf("reference verifier rejected %q: %v", sig, err)
			}
		})
	}
}

func TestReferenceLibrarySignatureMatchesOurs(t *testing.T) {
	secret := GenerateSecret()
	ts := time.Unix(1_700_000_000, 0)
	body := []byte(`{"a":1}`)
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	want, err := wh.Sign("msg_1", ts, body)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := NewSigner(secret)
	if got := s.Sign("msg_1", ts, body); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestVerifyRejectsTampering(t *testing.T) {
	secret := GenerateSecret()
	s, _ := NewSigner(secret)
	now := time.Unix(1_700_000_000, 0)
	body := []byte(`{"a":1}`)
	ts := strconv.FormatInt(now.Unix(), 10)
	sig := s.Sign("evt_1", now, body)
	other, _ := NewSigner(GenerateSecret())
	tests := []struct {
		name              string
		signer            *Signer
		id, ts, sig, body string
		now               time.Time
		want              error
	}{
		{"valid", s, "evt_1", ts, sig, string(body), now, nil},
		{"body changed", s, "evt_1", ts, sig, `{"a":2}`, now, ErrNoMatchingSignature},
		{"id changed", s, "evt_2", ts, sig, string(body), now, ErrNoMatchingSignature},
		{"wrong secret", other, "evt_1", ts, sig, string(body), now, ErrNoMatchingSignature},
		{"stale", s, "evt_1", ts, sig, string(body), now.Add(6 * time.Minute), ErrTimestampTooOld},
		{"future", s, "evt_1", ts, sig, string(body), now.Add(-6 * time.Minute), ErrTimestampTooOld},
		{"bad timestamp", s, "evt_1", "x", sig, string(body), now, ErrBadTimestamp},
		{"missing", s, "", ts, sig, string(body), now, ErrMissingHeaders},
		{"v2 only", s, "evt_1", ts, strings.Replace(sig, "v1,", "v2,", 1), string(body), now, ErrNoMatchingSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.signer.Verify(tt.id, tt.ts, tt.sig, []byte(tt.body), tt.now, DefaultTolerance)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestParseSecret(t *testing.T) {
	tests := []struct {
		give string
		ok   bool
	}{
		{GenerateSecret(), true},
		{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", true}, // 24 bytes
		{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", false},      // no prefix
		{"whsec_c2hvcnQ=", false},                        // too short
		{"whsec_!!!", false},                             // not base64
		{"", false},
	}
	for _, tt := range tests {
		if _, err := ParseSecret(tt.give); (err == nil) != tt.ok {
			t.Errorf("ParseSecret(%q) error = %v, want ok=%v", tt.give, err, tt.ok)
		}
	}
}

func FuzzVerifyNeverPanics(f *testing.F) {
	f.Add("evt_1", "1700000000", "v1,abc v1,def", []byte("{}"))
	f.Add("", "", ",,,", []byte(nil))
	s, _ := NewSigner(GenerateSecret())
	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte) {
		_ = s.Verify(id, ts, sig, body, time.Unix(1_700_000_000, 0), DefaultTolerance)
	})
}
