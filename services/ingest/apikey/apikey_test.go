package apikey

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func TestParseAndResolve(t *testing.T) {
	sum := sha256.Sum256([]byte("key-of-tenant-b-123"))
	pub := sha256.Sum256([]byte("key-of-tenant-c-123"))
	r, err := Parse([]string{
		"a:key-of-tenant-a-123",
		"b:sha256:" + hex.EncodeToString(sum[:]),
		"c:publish:sha256:" + hex.EncodeToString(pub[:]),
		"d:read:key-of-tenant-d-123",
		"e:admin:key-of-tenant-e-123",
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]Principal{
		// Entries without a scope, the format before scopes, stay admin.
		"key-of-tenant-a-123": {"a", ScopeAdmin},
		"key-of-tenant-b-123": {"b", ScopeAdmin},
		"key-of-tenant-c-123": {"c", ScopePublish},
		"key-of-tenant-d-123": {"d", ScopeRead},
		"key-of-tenant-e-123": {"e", ScopeAdmin},
	} {
		if got, ok := r.Resolve(key); !ok || got != want {
			t.Errorf("Resolve(%q) = %+v, %v; want %+v", key, got, ok, want)
		}
	}
	if _, ok := r.Tenant("wrong-key-000000000"); ok {
		t.Error("an unknown key resolved")
	}
}

func TestParseErrorsNeverEchoTheKey(t *testing.T) {
	for _, give := range [][]string{{"nokey"}, {"t:short-secret"}, {"t:sha256:zz"}, {"t:read:short-secret"}, nil} {
		_, err := Parse(give, 0)
		if err == nil {
			t.Fatalf("Parse(%q) accepted", give)
		}
		if strings.Contains(err.Error(), "short-secret") {
			t.Fatalf("error leaks the key: %v", err)
		}
	}
}

func TestNewKeysAreAdmittedByTheirHashedEntryOnly(t *testing.T) {
	key, entry, err := New("acme", ScopeRead)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(entry, key) || !strings.HasPrefix(entry, "acme:read:sha256:") {
		t.Fatalf("entry %q holds the key or names the wrong tenant or scope", entry)
	}
	other, _, err := New("acme", ScopeRead)
	if err != nil || other == key {
		t.Fatalf("two new keys are equal (%v)", err)
	}
	r, err := Parse([]string{entry}, MinBits)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := r.Resolve(key); !ok || p != (Principal{"acme", ScopeRead}) {
		t.Fatalf("the new key resolves to %+v, %v", p, ok)
	}
	if _, ok := r.Tenant(other); ok {
		t.Fatal("another key resolved")
	}
	for _, bad := range []string{"", "a:b", "a,b", "a#b", " a"} {
		if _, _, err := New(bad, ScopeAdmin); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
	if _, _, err := New("acme", "write"); err == nil {
		t.Error("New with an unknown scope accepted")
	}
}

func TestWeakKeysAreRefusedOutsideDevMode(t *testing.T) {
	strong, _, _ := New("t", ScopeAdmin)
	tests := []struct {
		give string
		weak bool
	}{
		{strong, false},
		{"hk_chaos_5b0e8f2d7c41a9e6d3b8f0c2a7e4d1b9", false},  // 32 random hex digits: 128 bits
		{"key-9c2f4e1a7b3d5e8f0a6c2d4b", true},                // 24 random hex digits: 96 bits
		{"hk_" + strings.Repeat("0123456789abcdef", 4), true}, // 64 hex digits, a pattern
		{"other-replica-key", true},
		{"short-but-16-chars-key", true},
		{"hk_fuzz_key_0123456789", true},
		{"correcthorsebatterystaple", true},
		{"Password1234567890!", true},
		{strings.Repeat("ab", 40), true},                           // long, two characters
		{strings.Repeat("abcdefg", 10), true},                      // long, seven characters
		{"Zm9vYmFyYmF6cXV4cXV1eHF1dXpxdXV4cXV1eA", false},          // 38 base64 characters
		{"hk_dev_91b183d23dba06241a681f5536d42ce5bde0fade", false}, // hookline dev's form: 160 bits
	}
	for _, tt := range tests {
		_, err := Parse([]string{"t:" + tt.give}, MinBits)
		if gotWeak := err != nil; gotWeak != tt.weak {
			t.Errorf("%q (%+v): refused %v, want %v (%v)", tt.give, Measure(tt.give), gotWeak, tt.weak, err)
		}
		if err != nil && (!strings.Contains(err.Error(), "hookline apikey new") || strings.Contains(err.Error(), tt.give)) {
			t.Errorf("the refusal echoes the key or does not say how to make a strong key: %v", err)
		}
		if _, err := Parse([]string{"t:" + tt.give}, 0); err != nil {
			t.Errorf("%q refused in dev mode: %v", tt.give, err)
		}
	}
}
