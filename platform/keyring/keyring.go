// Package keyring seals endpoint signing secrets at rest (envelope
// encryption): each secret is encrypted with AES-256-GCM under a
// key-encryption key (KEK) named by an id, read from a key file, and the
// record keeps the key id, the nonce and the ciphertext. The additional
// authenticated data names the secret's tenant and endpoint, so a sealed
// secret copied into another endpoint's record does not open.
//
// The key file holds one key per line, "<id> <base64 of 32 bytes>";
// blank lines and lines starting with '#' are ignored. The first key
// seals every new secret; every key in the file opens. To rotate, put a
// new key first, restart the services, run `hookline secrets rekey`, and
// only then remove the old key.
//
// The same keys authenticate delivery records: a MAC key derived from
// each (recordmac.go) lets the dispatcher send only records ingest wrote.
package keyring

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/sdk/sign"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// KeySize is the size of a key-encryption key in bytes (AES-256).
const KeySize = 32

// keyID is what a key id may look like.
var keyID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Errors opening a secret. Both are wrapped with the key id and what to do.
var (
	// ErrUnknownKey: the secret is sealed under a key id the key file
	// does not hold.
	ErrUnknownKey = errors.New("keyring: sealed under a key the key file does not hold")
	// ErrNotOpened: the key of that id does not open the secret (another
	// key under the same id, a corrupted record, or a sealed secret moved
	// to another endpoint).
	ErrNotOpened = errors.New("keyring: sealed secret does not open")
)

// Keyring seals and opens endpoint secrets. It is immutable and safe for
// concurrent use.
type Keyring struct {
	current string // id of the key that seals; "" in plaintext mode
	aeads   map[string]cipher.AEAD
	macs    map[string]*recordMACKey // delivery-record MAC keys by key id (recordmac.go)
}

// Plaintext returns a Keyring that seals nothing: new secrets are stored
// in the clear (--insecure-plaintext-secrets). It cannot open sealed
// secrets.
func Plaintext() *Keyring { return &Keyring{aeads: map[string]cipher.AEAD{}} }

// Load reads a key file (see the package comment).
func Load(path string) (*Keyring, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("keyring: %w", err)
	}
	k, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// Parse reads the contents of a key file.
func Parse(data []byte) (*Keyring, error) {
	k := &Keyring{aeads: map[string]cipher.AEAD{}, macs: map[string]*recordMACKey{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("keyring: line %d: want \"<id> <base64 of %d bytes>\"", n, KeySize)
		}
		id, enc := fields[0], fields[1]
		if !keyID.MatchString(id) {
			return nil, fmt.Errorf("keyring: line %d: key id %q: use 1 to 64 of A-Z a-z 0-9 . _ -", n, id)
		}
		if _, dup := k.aeads[id]; dup {
			return nil, fmt.Errorf("keyring: line %d: key id %q appears twice", n, id)
		}
		raw, err := base64.StdEncoding.DecodeString(enc)
		if err != nil || len(raw) != KeySize {
			return nil, fmt.Errorf("keyring: line %d: key %q must be the base64 of %d random bytes (make one with `hookline secrets new-key`)", n, id, KeySize)
		}
		aead, err := newAEAD(raw)
		if err != nil {
			return nil, fmt.Errorf("keyring: line %d: %w", n, err)
		}
		k.aeads[id] = aead
		if k.macs[id], err = newRecordMACKey(raw); err != nil {
			return nil, fmt.Errorf("keyring: line %d: %w", n, err)
		}
		if k.current == "" {
			k.current = id
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("keyring: %w", err)
	}
	if k.current == "" {
		return nil, errors.New("keyring: the key file holds no key")
	}
	return k, nil
}

func newAEAD(raw []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// NewKeyLine returns a key-file line with a fresh random key, named
// after now ("k" and the UTC time to the second).
func NewKeyLine(now time.Time) string {
	b := make([]byte, KeySize)
	_, _ = rand.Read(b) // crypto/rand never fails (Go 1.24+)
	return "k" + now.UTC().Format("20060102T150405Z") + " " + base64.StdEncoding.EncodeToString(b)
}

// CreateFile writes a new key file with one fresh key at path, readable
// by its owner only, unless the file exists. It reports whether it made
// the file.
func CreateFile(path string, now time.Time) (bool, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("keyring: %w", err)
	}
	_, err = fmt.Fprintf(f, "# Hookline secrets key file: \"<id> <base64 of %d bytes>\" per line; the first seals, all open.\n%s\n", KeySize, NewKeyLine(now))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("keyring: %w", err)
	}
	return true, nil
}

// Current returns the id of the key that seals new secrets, or "" for a
// plaintext Keyring.
func (k *Keyring) Current() string { return k.current }

// aad binds a sealed secret to its endpoint.
func aad(tenant, endpointID string) []byte {
	return []byte("hookline/endpoint-secret/v1\x00" + tenant + "\x00" + endpointID)
}

// Seal returns secret as an EndpointSecret of the endpoint (tenant,
// endpointID), sealed under the current key (in the clear for a
// plaintext Keyring), with its public key when it is an ed25519 key.
func (k *Keyring) Seal(tenant, endpointID, secret string, created time.Time) (*hooklinev1.EndpointSecret, error) {
	es := &hooklinev1.EndpointSecret{CreatedAt: timestamppb.New(created)}
	if sign.Asymmetric(secret) {
		pub, err := sign.PublicKey(secret)
		if err != nil {
			return nil, err
		}
		es.PublicKey = pub
	}
	if k.current == "" {
		es.Secret = secret
		return es, nil
	}
	es.Sealed = k.seal(tenant, endpointID, secret)
	return es, nil
}

func (k *Keyring) seal(tenant, endpointID, secret string) *hooklinev1.SealedSecret {
	aead := k.aeads[k.current]
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce) // crypto/rand never fails (Go 1.24+)
	return &hooklinev1.SealedSecret{
		KeyId:      k.current,
		Nonce:      nonce,
		Ciphertext: aead.Seal(nil, nonce, []byte(secret), aad(tenant, endpointID)),
	}
}

// Open returns the secret of es, an EndpointSecret of endpoint (tenant,
// endpointID): opened with the key its seal names, or as stored when it
// is in the clear. Errors wrap ErrUnknownKey or ErrNotOpened and say
// what to fix.
func (k *Keyring) Open(tenant, endpointID string, es *hooklinev1.EndpointSecret) (string, error) {
	sealed := es.GetSealed()
	if sealed == nil {
		return es.GetSecret(), nil
	}
	aead, ok := k.aeads[sealed.GetKeyId()]
	if !ok {
		if k.current == "" {
			return "", fmt.Errorf("%w: secret of endpoint %s is sealed under key %q, and no --secrets-key-file is given (--insecure-plaintext-secrets cannot open sealed secrets)", ErrUnknownKey, endpointID, sealed.GetKeyId())
		}
		return "", fmt.Errorf("%w: secret of endpoint %s is sealed under key %q, which --secrets-key-file does not hold: add that key back to the file (any line after the first) and restart", ErrUnknownKey, endpointID, sealed.GetKeyId())
	}
	if len(sealed.GetNonce()) != aead.NonceSize() {
		return "", fmt.Errorf("%w: secret of endpoint %s: nonce of %d bytes", ErrNotOpened, endpointID, len(sealed.GetNonce()))
	}
	plain, err := aead.Open(nil, sealed.GetNonce(), sealed.GetCiphertext(), aad(tenant, endpointID))
	if err != nil {
		return "", fmt.Errorf("%w: secret of endpoint %s under key %q: the file's key %q is not the one that sealed it, or the record was altered or copied from another endpoint", ErrNotOpened, endpointID, sealed.GetKeyId(), sealed.GetKeyId())
	}
	return string(plain), nil
}

// Reseal returns es sealed under the current key, and whether that
// changed anything: a secret in the clear or under an older key is
// opened and sealed again; one under the current key is returned as is.
// es is not modified.
func (k *Keyring) Reseal(tenant, endpointID string, es *hooklinev1.EndpointSecret) (*hooklinev1.EndpointSecret, bool, error) {
	if k.current == "" {
		return nil, false, errors.New("keyring: rekey needs --secrets-key-file")
	}
	if es.GetSealed().GetKeyId() == k.current {
		return es, false, nil
	}
	secret, err := k.Open(tenant, endpointID, es)
	if err != nil {
		return nil, false, err
	}
	out := &hooklinev1.EndpointSecret{
		CreatedAt: es.GetCreatedAt(),
		ExpiresAt: es.GetExpiresAt(),
		PublicKey: es.GetPublicKey(),
		Sealed:    k.seal(tenant, endpointID, secret),
	}
	return out, true, nil
}
