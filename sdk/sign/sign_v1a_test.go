package sign_test

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/sdk/sign"
	"github.com/hookline/hookline/sdk/sign/signtest"
)

func TestV1ASignatureVerifiesWithNodeCrypto(t *testing.T) {
	priv, pub := sign.GenerateKeyPair()
	oldPriv, oldPub := sign.GenerateKeyPair()
	s, err := sign.NewSigner(priv, oldPriv)
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Unix(1_700_000_000, 0)
	body := []byte(`{"type":"invoice.paid","amount":42}`)
	header := s.Sign("msg_1", ts, body)
	if parts := strings.Fields(header); len(parts) != 2 || !strings.HasPrefix(parts[0], "v1a,") || !strings.HasPrefix(parts[1], "v1a,") {
		t.Fatalf("header %q: want two v1a signatures", header)
	}
	m := signtest.Message{ID: "msg_1", Timestamp: strconv.FormatInt(ts.Unix(), 10), Body: body, Signature: header}
	for _, key := range []string{pub, oldPub} {
		m.PublicKey = key
		if !signtest.VerifyWithNode(t, m) {
			t.Fatalf("node rejected %q with %s", header, key)
		}
	}
	m.PublicKey = pub
	m.Body = []byte(`{"type":"invoice.paid","amount":43}`)
	if signtest.VerifyWithNode(t, m) {
		t.Fatal("node accepted a signature over another body: the check proves nothing")
	}
}

func TestV1AAndV1SignTogetherDuringASchemeChange(t *testing.T) {
	priv, pub := sign.GenerateKeyPair()
	hmacSecret := sign.GenerateSecret()
	s, err := sign.NewSigner(priv, hmacSecret)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ts := strconv.FormatInt(now.Unix(), 10)
	header := s.Sign("msg_2", now, []byte("{}"))
	if !strings.HasPrefix(header, "v1a,") || !strings.Contains(header, " v1,") {
		t.Fatalf("header %q: want v1a then v1", header)
	}
	for _, key := range []string{pub, hmacSecret} {
		v, err := sign.NewVerifier(key)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Verify("msg_2", ts, header, []byte("{}"), now, sign.DefaultTolerance); err != nil {
			t.Fatalf("verify with %s: %v", key[:5], err)
		}
	}
	_, otherPub := sign.GenerateKeyPair()
	v, _ := sign.NewVerifier(otherPub)
	if err := v.Verify("msg_2", ts, header, []byte("{}"), now, sign.DefaultTolerance); !errors.Is(err, sign.ErrNoMatchingSignature) {
		t.Fatalf("another public key: got %v, want ErrNoMatchingSignature", err)
	}
}

func TestParseEd25519Keys(t *testing.T) {
	priv, pub := sign.GenerateKeyPair()
	got, err := sign.PublicKey(priv)
	if err != nil || got != pub {
		t.Fatalf("PublicKey(%s) = %q, %v; want %q", priv, got, err, pub)
	}
	k, _ := sign.ParsePrivateKey(priv)
	tamper := []byte(priv)
	tamper[len(tamper)-3] ^= 1 // the public half no longer matches
	tests := []struct {
		give string
		ok   bool
	}{
		{priv, true},
		{sign.PrivateKeyPrefix + b64(k.Seed()), true},
		{string(tamper), false},
		{pub, false},
		{"whsk_not base64", false},
		{sign.PrivateKeyPrefix + b64(make([]byte, 16)), false},
		{sign.GenerateSecret(), false},
	}
	for _, tt := range tests {
		_, err := sign.ParsePrivateKey(tt.give)
		if (err == nil) != tt.ok {
			t.Errorf("ParsePrivateKey(%q) = %v, want ok=%v", tt.give, err, tt.ok)
		}
	}
	if _, err := sign.ParsePublicKey(pub); err != nil {
		t.Fatal(err)
	}
	if _, err := sign.ParsePublicKey(priv); err == nil {
		t.Fatal("a private key parsed as a public key")
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// BenchmarkSign compares one attempt's signing cost per scheme.
func BenchmarkSign(b *testing.B) {
	priv, _ := sign.GenerateKeyPair()
	body := make([]byte, 1024)
	for _, bc := range []struct{ name, secret string }{{"v1", sign.GenerateSecret()}, {"v1a", priv}} {
		s, err := sign.NewSigner(bc.secret)
		if err != nil {
			b.Fatal(err)
		}
		ts := time.Unix(1_700_000_000, 0)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = s.Sign("msg_1", ts, body)
			}
		})
	}
}
