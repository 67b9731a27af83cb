package e2e

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/endpoints"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/sign"
	"github.com/hookline/hookline/platform/sign/signtest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// TestEndpointsTopicHoldsNoSecretBytes creates, rotates and signs with
// endpoint secrets of both schemes through the API, then reads the raw
// endpoints topic with a plain Kafka client: no record holds any secret,
// neither as given nor as its key bytes.
func TestEndpointsTopicHoldsNoSecretBytes(t *testing.T) {
	st := startStack(t)
	rx := newReceiver(t, http.StatusOK)
	v1 := sign.GenerateSecret()
	created := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, Secret: v1})
	rotated := sign.GenerateSecret()
	if _, err := st.endpoints().RotateEndpointSecret(st.ctx(), &hooklinev1.RotateEndpointSecretRequest{Id: created.GetEndpoint().GetId(), Secret: rotated}); err != nil {
		t.Fatal(err)
	}
	priv, _ := sign.GenerateKeyPair()
	v1a := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, Secret: priv, SignatureScheme: hooklinev1.SignatureScheme_SIGNATURE_SCHEME_V1A})
	if v1a.GetSecret() != "" || !strings.HasPrefix(v1a.GetPublicKey(), sign.PublicKeyPrefix) {
		t.Fatalf("v1a create answered secret %q, public key %q: want no secret, a whpk_ key", v1a.GetSecret(), v1a.GetPublicKey())
	}
	got, err := st.endpoints().GetEndpoint(st.ctx(), &hooklinev1.GetEndpointRequest{Id: created.GetEndpoint().GetId()})
	if err != nil || got.GetSecret() != rotated {
		t.Fatalf("GetEndpoint opened %q, %v; want the rotated secret", got.GetSecret(), err)
	}

	var needles [][]byte
	for _, s := range []string{v1, rotated} {
		key, _ := sign.ParseSecret(s)
		needles = append(needles, []byte(s), key, []byte(strings.TrimPrefix(s, sign.SecretPrefix)))
	}
	pk, _ := sign.ParsePrivateKey(priv)
	needles = append(needles, []byte(priv), pk.Seed(), []byte(base64.StdEncoding.EncodeToString(pk.Seed())))
	recs, err := hkafka.ReadAll(st.ctx(), st.kafka, st.topics.Endpoints)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) < 3 {
		t.Fatalf("read %d endpoint records, want at least 3", len(recs))
	}
	for _, r := range recs {
		for _, n := range needles {
			if bytes.Contains(r.Value, n) {
				t.Fatalf("record %s@%d of %s holds secret bytes %q", r.Key, r.Offset, st.topics.Endpoints, n)
			}
		}
	}
}

// TestV1ADeliveryVerifiesWithNodeAgainstTheServedPublicKey delivers to a
// v1a endpoint and checks the signature the receiver got with Node's own
// ed25519 (crypto.verify) and the public key GetEndpoint serves.
func TestV1ADeliveryVerifiesWithNodeAgainstTheServedPublicKey(t *testing.T) {
	st := startStack(t)
	rx := newReceiver(t, http.StatusOK)
	ep := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, SignatureScheme: hooklinev1.SignatureScheme_SIGNATURE_SCHEME_V1A})
	got, err := st.endpoints().GetEndpoint(st.ctx(), &hooklinev1.GetEndpointRequest{Id: ep.GetEndpoint().GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetSecret() != "" || got.GetPublicKey() != ep.GetPublicKey() || got.GetEndpoint().GetSignatureScheme() != hooklinev1.SignatureScheme_SIGNATURE_SCHEME_V1A {
		t.Fatalf("GetEndpoint = %v: want no secret, the public key %q, scheme V1A", got, ep.GetPublicKey())
	}
	payload := `{"invoice":"in_1"}`
	st.publish("invoice.paid", payload)
	st.deliveredAll(1)
	p := rx.got()[0]
	sig := p.header.Get(sign.HeaderSignature)
	if !strings.HasPrefix(sig, "v1a,") {
		t.Fatalf("webhook-signature %q: want a v1a signature", sig)
	}
	m := signtest.Message{PublicKey: got.GetPublicKey(), ID: p.header.Get(sign.HeaderID), Timestamp: p.header.Get(sign.HeaderTimestamp), Body: p.body, Signature: sig}
	if !signtest.VerifyWithNode(t, m) {
		t.Fatalf("node rejected the delivery's signature %q", sig)
	}
}

// TestRotationBeyondTheActiveSecretLimitIsRefused: at most
// endpoints.MaxActiveSecrets secrets sign at once; one more rotation is
// refused with FAILED_PRECONDITION saying to expire one first, and a
// rotation that expires the current secret at once goes through.
func TestRotationBeyondTheActiveSecretLimitIsRefused(t *testing.T) {
	st := startStack(t)
	ep := st.createEndpoint("http://127.0.0.1:9/hooks")
	id := ep.GetEndpoint().GetId()
	for range endpoints.MaxActiveSecrets - 1 {
		if _, err := st.endpoints().RotateEndpointSecret(st.ctx(), &hooklinev1.RotateEndpointSecretRequest{Id: id}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := st.endpoints().RotateEndpointSecret(st.ctx(), &hooklinev1.RotateEndpointSecretRequest{Id: id})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "expire one first") {
		t.Fatalf("rotation beyond %d active secrets: %v; want FAILED_PRECONDITION saying to expire one first", endpoints.MaxActiveSecrets, err)
	}
	if _, err := st.endpoints().RotateEndpointSecret(st.ctx(), &hooklinev1.RotateEndpointSecretRequest{Id: id, GracePeriod: durationpb.New(0)}); err != nil {
		t.Fatalf("rotation with grace_period 0: %v", err)
	}
}
