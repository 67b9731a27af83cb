package pagetoken

import (
	"errors"
	"testing"
)

func TestTokenRoundTripsOnlyForItsTenantQueryAndKey(t *testing.T) {
	c := New([]byte("secret"))
	tok := c.Encode("acme", "endpoint=ep_1", "dlv_01")
	if got, err := c.Decode("acme", "endpoint=ep_1", tok); err != nil || got != "dlv_01" {
		t.Fatalf("Decode = %q, %v; want dlv_01", got, err)
	}
	flipped := []byte(tok)
	flipped[3] ^= 1
	tests := []struct {
		name, tenant, query, token string
		codec                      *Codec
	}{
		{"another tenant", "other", "endpoint=ep_1", tok, c},
		{"other filters", "acme", "endpoint=ep_2", tok, c},
		{"another key", "acme", "endpoint=ep_1", tok, New([]byte("other"))},
		{"altered", "acme", "endpoint=ep_1", string(flipped), c},
		{"not base64", "acme", "endpoint=ep_1", "%%%", c},
		{"too short", "acme", "endpoint=ep_1", "AQ", c},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.codec.Decode(tt.tenant, tt.query, tt.token); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Decode = %v, want ErrInvalid", err)
			}
		})
	}
}

func FuzzDecodeNeverPanics(f *testing.F) {
	c := New([]byte("k"))
	f.Add(c.Encode("t", "q", "dlv_1"))
	f.Add("")
	f.Fuzz(func(t *testing.T, tok string) {
		if after, err := c.Decode("t", "q", tok); err == nil && c.Encode("t", "q", after) != tok {
			t.Fatalf("accepted %q, which Encode does not make", tok)
		}
	})
}
