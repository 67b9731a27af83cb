package ingest

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/endpoints"
	"github.com/hookline/hookline/platform/keyring"
	"github.com/hookline/hookline/sdk/sign"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// An endpoint's signing secrets: chosen (given or generated) per
// signature scheme, sealed with the keyring before they are written, and
// opened only to answer the caller who owns them. A V1A endpoint's
// private key is never answered: its public key is.

// givenSecret checks a secret a caller supplied for scheme and returns
// the scheme it signs with (UNSPECIFIED follows the secret's prefix).
func givenSecret(field, secret string, scheme hooklinev1.SignatureScheme) (hooklinev1.SignatureScheme, error) {
	if scheme == hooklinev1.SignatureScheme_SIGNATURE_SCHEME_UNSPECIFIED {
		scheme = hooklinev1.SignatureScheme_SIGNATURE_SCHEME_V1
		if sign.Asymmetric(secret) {
			scheme = hooklinev1.SignatureScheme_SIGNATURE_SCHEME_V1A
		}
	}
	switch scheme {
	case hooklinev1.SignatureScheme_SIGNATURE_SCHEME_V1:
		if secret == "" {
			return scheme, nil
		}
		if _, err := sign.ParseSecret(secret); err != nil {
			return 0, invalid(field, "%v (signature scheme V1)", err)
		}
	case hooklinev1.SignatureScheme_SIGNATURE_SCHEME_V1A:
		if secret == "" {
			return scheme, nil
		}
		if _, err := sign.ParsePrivateKey(secret); err != nil {
			return 0, invalid(field, "%v (signature scheme V1A: give the private key, or leave it empty to have one made)", err)
		}
	default:
		return 0, invalid("signature_scheme", "unknown value %d; use SIGNATURE_SCHEME_V1 or SIGNATURE_SCHEME_V1A", scheme)
	}
	return scheme, nil
}

// newSecret returns secret, or a fresh one of scheme when it is empty.
func newSecret(secret string, scheme hooklinev1.SignatureScheme) string {
	switch {
	case secret != "":
		return secret
	case scheme == hooklinev1.SignatureScheme_SIGNATURE_SCHEME_V1A:
		priv, _ := sign.GenerateKeyPair()
		return priv
	}
	return sign.GenerateSecret()
}

// endpointSecrets seals the endpoint secrets this service writes and
// opens the ones it answers, with the keyring (--secrets-key-file); it
// logs a secret that does not open. It holds nothing else.
type endpointSecrets struct {
	keyring *keyring.Keyring
	log     *slog.Logger
}

// seal returns secret as a sealed EndpointSecret of rec's endpoint.
func (x *endpointSecrets) seal(rec *hooklinev1.EndpointRecord, secret string, now time.Time) (*hooklinev1.EndpointSecret, error) {
	ep := rec.GetEndpoint()
	es, err := x.keyring.Seal(ep.GetTenantId(), ep.GetId(), secret, now)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "seal the endpoint secret: %v", err)
	}
	return es, nil
}

// open returns the secret of es, one of rec's secrets.
func (x *endpointSecrets) open(rec *hooklinev1.EndpointRecord, es *hooklinev1.EndpointSecret) (string, error) {
	ep := rec.GetEndpoint()
	secret, err := x.keyring.Open(ep.GetTenantId(), ep.GetId(), es)
	if err != nil {
		x.log.Error("endpoint secret does not open", "endpoint_id", ep.GetId(), "err", err)
		return "", status.Errorf(codes.Internal, "the endpoint's signing secret cannot be read by this server (its operator must fix --secrets-key-file): %v", err)
	}
	return secret, nil
}

// openCredential returns the value of c, one of rec's credentials.
func (x *endpointSecrets) openCredential(rec *hooklinev1.EndpointRecord, c *hooklinev1.EndpointCredential) (string, error) {
	ep := rec.GetEndpoint()
	v, err := x.keyring.OpenCredential(ep.GetTenantId(), ep.GetId(), c)
	if err != nil {
		x.log.Error("endpoint credential does not open", "endpoint_id", ep.GetId(), "credential", c.GetName(), "err", err)
		return "", status.Errorf(codes.Internal, "the endpoint's credential %s cannot be read by this server (its operator must fix --secrets-key-file): %v", c.GetName(), err)
	}
	return v, nil
}

// shown is what a caller is shown of a secret: the secret itself for V1,
// the public key for V1A.
func shown(es *hooklinev1.EndpointSecret, secret string) (shownSecret, publicKey string) {
	if es.GetPublicKey() != "" || sign.Asymmetric(secret) {
		return "", es.GetPublicKey()
	}
	return secret, ""
}

// schemeOf returns the signature scheme of es.
func schemeOf(es *hooklinev1.EndpointSecret) hooklinev1.SignatureScheme {
	if es.GetPublicKey() != "" {
		return hooklinev1.SignatureScheme_SIGNATURE_SCHEME_V1A
	}
	return hooklinev1.SignatureScheme_SIGNATURE_SCHEME_V1
}

// rotate makes secret the current secret of rec: the old current one
// signs until now+grace, and those already past their grace are
// dropped. At most endpoints.MaxActiveSecrets may sign at once.
func (x *endpointSecrets) rotate(rec *hooklinev1.EndpointRecord, secret string, grace time.Duration, now time.Time) error {
	cur, err := x.seal(rec, secret, now)
	if err != nil {
		return err
	}
	kept := []*hooklinev1.EndpointSecret{cur}
	earliest := time.Time{}
	for i, old := range rec.GetSecrets() {
		if i == 0 {
			old.ExpiresAt = timestamppb.New(now.Add(grace))
		}
		exp := old.GetExpiresAt().AsTime()
		if !exp.After(now) {
			continue
		}
		kept = append(kept, old)
		if i > 0 && (earliest.IsZero() || exp.Before(earliest)) {
			earliest = exp
		}
	}
	if len(kept) > endpoints.MaxActiveSecrets {
		msg := fmt.Sprintf("endpoint %s would have %d secrets signing at once, at most %d may: expire one first — wait until the oldest rotated-out secret expires", rec.GetEndpoint().GetId(), len(kept), endpoints.MaxActiveSecrets)
		if !earliest.IsZero() {
			msg += " (at " + earliest.UTC().Format(time.RFC3339) + ")"
		}
		return status.Error(codes.FailedPrecondition, msg+", or rotate with grace_period 0 so the current secret stops signing at once")
	}
	rec.Secrets = kept
	rec.Endpoint.SignatureScheme = schemeOf(cur)
	return nil
}

// holds reports whether secret is one of rec's secrets.
func (x *endpointSecrets) holds(rec *hooklinev1.EndpointRecord, secret string) (bool, error) {
	for _, es := range rec.GetSecrets() {
		have, err := x.open(rec, es)
		if err != nil {
			return false, err
		}
		if have == secret {
			return true, nil
		}
	}
	return false, nil
}

// publicKeys returns the public keys of rec's ed25519 keys that sign at
// now, current first.
func publicKeys(rec *hooklinev1.EndpointRecord, now time.Time) []string {
	var out []string
	for _, es := range rec.GetSecrets() {
		if exp := es.GetExpiresAt(); exp != nil && !exp.AsTime().After(now) {
			continue
		}
		if pk := es.GetPublicKey(); strings.HasPrefix(pk, sign.PublicKeyPrefix) {
			out = append(out, pk)
		}
	}
	return out
}
