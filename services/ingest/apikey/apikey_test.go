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

func TestNewKeysAreAdmittedByTheirHashedEntryOnly(t *testing.T) {
	key, entry, err := New("acme")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(entry, key) || !strings.HasPrefix(entry, "acme:sha256:") {
		t.Fatalf("entry %q holds the key or names the wrong tenant", entry)
	}
	other, _, err := New("acme")
	if err != nil || other == key {
		t.Fatalf("two new keys are equal (%v)", err)
	}
	r, err := Parse([]string{entry})
	if err != nil {
		t.Fatal(err)
	}
	if tenant, ok := r.Tenant(key); !ok || tenant != "acme" {
		t.Fatalf("the new key resolves to %q, %v", tenant, ok)
	}
	if _, ok := r.Tenant(other); ok {
		t.Fatal("another key resolved")
	}
	for _, bad := range []string{"", "a:b", "a,b"} {
		if _, _, err := New(bad); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
}
