package apikey

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func TestParseAndResolve(t *testing.T) {
	sum := sha256.Sum256([]byte("key-of-tenant-b-123"))
	r, err := Parse([]string{"a:key-of-tenant-a-123", "b:sha256:" + hex.EncodeToString(sum[:])})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"key-of-tenant-a-123": "a", "key-of-tenant-b-123": "b"} {
		if got, ok := r.Tenant(key); !ok || got != want {
			t.Errorf("Tenant(%q) = %q, %v; want %q", key, got, ok, want)
		}
	}
	if _, ok := r.Tenant("wrong-key-000000000"); ok {
		t.Error("an unknown key resolved")
	}
}

func TestParseErrorsNeverEchoTheKey(t *testing.T) {
	for _, give := range [][]string{{"nokey"}, {"t:short-secret"}, {"t:sha256:zz"}, nil} {
		_, err := Parse(give)
		if err == nil {
			t.Fatalf("Parse(%q) accepted", give)
		}
		if strings.Contains(err.Error(), "short-secret") {
			t.Fatalf("error leaks the key: %v", err)
		}
	}
}
