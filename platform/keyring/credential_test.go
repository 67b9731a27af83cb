package keyring

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestSealedCredentialOpensOnlyUnderItsEndpointAndName(t *testing.T) {
	k := mustParse(t, NewKeyLine(t0))
	const value = "s3cr3t-header-value"
	c := k.SealCredential("acme", "ep_1", "header:x-api-key", value)
	if c.GetSecret() != "" || strings.Contains(string(c.GetSealed().GetCiphertext()), value) {
		t.Fatal("sealed credential holds its value in the clear")
	}
	if got, err := k.OpenCredential("acme", "ep_1", c); err != nil || got != value {
		t.Fatalf("OpenCredential = %q, %v", got, err)
	}
	moved := c
	if _, err := k.OpenCredential("acme", "ep_2", moved); !errors.Is(err, ErrNotOpened) {
		t.Fatalf("another endpoint: err = %v, want ErrNotOpened", err)
	}
	renamed := k.SealCredential("acme", "ep_1", "header:x-api-key", value)
	renamed.Name = "auth:token"
	_, err := k.OpenCredential("acme", "ep_1", renamed)
	if !errors.Is(err, ErrNotOpened) {
		t.Fatalf("another name: err = %v, want ErrNotOpened", err)
	}
	if strings.Contains(err.Error(), value) {
		t.Fatal("the error holds the value")
	}
}

func TestCredentialsResealUnderANewKey(t *testing.T) {
	oldLine, newLine := NewKeyLine(t0), NewKeyLine(t0.Add(time.Hour))
	c := mustParse(t, oldLine).SealCredential("acme", "ep_1", "auth:token", "tok")
	after := mustParse(t, newLine, oldLine)
	re, changed, err := after.ResealCredential("acme", "ep_1", c)
	if err != nil || !changed || re.GetSealed().GetKeyId() != after.Current() {
		t.Fatalf("ResealCredential = %v, %v (key %q)", changed, err, re.GetSealed().GetKeyId())
	}
	if got, err := mustParse(t, newLine).OpenCredential("acme", "ep_1", re); err != nil || got != "tok" {
		t.Fatalf("new key only: OpenCredential = %q, %v", got, err)
	}
	if got, err := Plaintext().OpenCredential("acme", "ep_1", Plaintext().SealCredential("acme", "ep_1", "auth:token", "tok")); err != nil || got != "tok" {
		t.Fatalf("plaintext: %q, %v", got, err)
	}
}
