package keyring

import (
	"crypto/rand"
	"fmt"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
)

// credentialAAD binds a sealed credential to its endpoint and its name:
// a sealed value copied to another endpoint, or to another name of the
// same endpoint (a header's value into the bearer token), does not open.
func credentialAAD(tenant, endpointID, name string) []byte {
	return []byte("hookline/endpoint-credential/v1\x00" + tenant + "\x00" + endpointID + "\x00" + name)
}

// SealCredential returns value as the credential name of the endpoint
// (tenant, endpointID), sealed under the current key (in the clear for a
// plaintext Keyring).
func (k *Keyring) SealCredential(tenant, endpointID, name, value string) *hooklinev1.EndpointCredential {
	c := &hooklinev1.EndpointCredential{Name: name}
	if k.current == "" {
		c.Secret = value
		return c
	}
	aead := k.aeads[k.current]
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce) // crypto/rand never fails (Go 1.24+)
	c.Sealed = &hooklinev1.SealedSecret{
		KeyId:      k.current,
		Nonce:      nonce,
		Ciphertext: aead.Seal(nil, nonce, []byte(value), credentialAAD(tenant, endpointID, name)),
	}
	return c
}

// OpenCredential returns the value of c, a credential of the endpoint
// (tenant, endpointID). Errors wrap ErrUnknownKey or ErrNotOpened and
// say what to fix; they never hold the value.
func (k *Keyring) OpenCredential(tenant, endpointID string, c *hooklinev1.EndpointCredential) (string, error) {
	sealed := c.GetSealed()
	if sealed == nil {
		return c.GetSecret(), nil
	}
	aead, ok := k.aeads[sealed.GetKeyId()]
	if !ok {
		return "", fmt.Errorf("%w: credential %s of endpoint %s is sealed under key %q, which --secrets-key-file does not hold: add that key back to the file (any line after the first) and restart", ErrUnknownKey, c.GetName(), endpointID, sealed.GetKeyId())
	}
	if len(sealed.GetNonce()) != aead.NonceSize() {
		return "", fmt.Errorf("%w: credential %s of endpoint %s: nonce of %d bytes", ErrNotOpened, c.GetName(), endpointID, len(sealed.GetNonce()))
	}
	plain, err := aead.Open(nil, sealed.GetNonce(), sealed.GetCiphertext(), credentialAAD(tenant, endpointID, c.GetName()))
	if err != nil {
		return "", fmt.Errorf("%w: credential %s of endpoint %s under key %q: the file's key is not the one that sealed it, or the record was altered or copied from another endpoint or name", ErrNotOpened, c.GetName(), endpointID, sealed.GetKeyId())
	}
	return string(plain), nil
}

// ResealCredential returns c sealed under the current key, and whether
// that changed anything (see Reseal). c is not modified.
func (k *Keyring) ResealCredential(tenant, endpointID string, c *hooklinev1.EndpointCredential) (*hooklinev1.EndpointCredential, bool, error) {
	if k.current == "" {
		return nil, false, fmt.Errorf("keyring: rekey needs --secrets-key-file")
	}
	if c.GetSealed().GetKeyId() == k.current {
		return c, false, nil
	}
	v, err := k.OpenCredential(tenant, endpointID, c)
	if err != nil {
		return nil, false, err
	}
	return k.SealCredential(tenant, endpointID, c.GetName(), v), true, nil
}
