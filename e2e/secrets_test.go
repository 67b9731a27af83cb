package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/config"
	"github.com/hookline/hookline/platform/endpoints"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/kafkatest"
	"github.com/hookline/hookline/platform/keyring"
	"github.com/hookline/hookline/sdk/sign"
	"github.com/hookline/hookline/sdk/sign/signtest"
	"github.com/hookline/hookline/services/dispatcher/dispatcher"
	"github.com/hookline/hookline/services/ingest/ingest"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// TestEndpointSecrets runs the secret tests that need a running stack on
// one stack (each starts its own endpoints).
func TestEndpointSecrets(t *testing.T) {
	st := startStack(t)
	t.Run("TheEndpointsTopicHoldsNoSecretBytes", func(t *testing.T) { endpointsTopicHoldsNoSecretBytes(t, st) })
	t.Run("V1ADeliveryVerifiesWithNodeAgainstTheServedPublicKey", func(t *testing.T) { v1aDeliveryVerifiesWithNode(t, st) })
	t.Run("RotationBeyondTheActiveSecretLimitIsRefused", func(t *testing.T) { rotationBeyondTheLimitIsRefused(t, st) })
	t.Run("V1AKeysRotateAndAV1EndpointSwitchesToV1A", func(t *testing.T) { v1aKeysRotate(t, st) })
}

// endpointsTopicHoldsNoSecretBytes creates, rotates and signs with
// endpoint secrets of both schemes, a secret custom header, basic,
// bearer and OAuth2 auth and a client certificate through the API, then
// reads the raw endpoints topic with a plain Kafka client: no record
// holds any secret, neither as given nor as its key bytes.
func endpointsTopicHoldsNoSecretBytes(t *testing.T, st *stack) {
	rx := newReceiver(t, http.StatusOK)
	v1 := sign.GenerateSecret()
	created := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, Secret: v1, EventTypes: []string{"none.ever"}})
	rotated := sign.GenerateSecret()
	if _, err := st.endpoints().RotateEndpointSecret(st.ctx(), &hooklinev1.RotateEndpointSecretRequest{Id: created.GetEndpoint().GetId(), Secret: rotated}); err != nil {
		t.Fatal(err)
	}
	priv, _ := sign.GenerateKeyPair()
	v1a := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, Secret: priv, SignatureScheme: hooklinev1.SignatureScheme_SIGNATURE_SCHEME_V1A, EventTypes: []string{"none.ever"}})
	if v1a.GetSecret() != "" || !strings.HasPrefix(v1a.GetPublicKey(), sign.PublicKeyPrefix) {
		t.Fatalf("v1a create answered secret %q, public key %q: want no secret, a whpk_ key", v1a.GetSecret(), v1a.GetPublicKey())
	}
	// A secret header's value, the receiver auth's secrets and a client
	// certificate's key are sealed like the signing secrets.
	const headerSecret, password, token, clientSecret = "hdr-value-b81d6e0c", "pw-3e9a1d", "tok-a70c55", "cs-d18f2b"
	ca := newTestCA(t, "secrets-ca")
	certPEM, keyPEM := ca.client(t, time.Now().Add(time.Hour))
	st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, EventTypes: []string{"none.ever"},
		Headers:   []*hooklinev1.EndpointHeader{{Name: "X-Api-Key", Value: headerSecret, Secret: true}},
		Auth:      &hooklinev1.ReceiverAuth{Method: &hooklinev1.ReceiverAuth_Basic_{Basic: &hooklinev1.ReceiverAuth_Basic{Username: "u", Password: password}}},
		ClientTls: &hooklinev1.ClientTLS{Certificate: certPEM, PrivateKey: keyPEM}})
	st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, EventTypes: []string{"none.ever"},
		Auth: &hooklinev1.ReceiverAuth{Method: &hooklinev1.ReceiverAuth_Bearer_{Bearer: &hooklinev1.ReceiverAuth_Bearer{Token: token}}}})
	st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, EventTypes: []string{"none.ever"},
		Auth: &hooklinev1.ReceiverAuth{Method: &hooklinev1.ReceiverAuth_Oauth2ClientCredentials{Oauth2ClientCredentials: &hooklinev1.ReceiverAuth_OAuth2ClientCredentials{
			TokenUrl: rx.URL + "/token", ClientId: "c", ClientSecret: clientSecret}}}})
	got, err := st.endpoints().GetEndpoint(st.ctx(), &hooklinev1.GetEndpointRequest{Id: created.GetEndpoint().GetId()})
	if err != nil || got.GetSecret() != rotated {
		t.Fatalf("GetEndpoint opened %q, %v; want the rotated secret", got.GetSecret(), err)
	}

	needles := [][]byte{[]byte(headerSecret), []byte(password), []byte(token), []byte(clientSecret), []byte(keyPEM), []byte(strings.Split(keyPEM, "\n")[1])}
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
	if len(recs) < 6 {
		t.Fatalf("read %d endpoint records, want at least 6", len(recs))
	}
	for _, r := range recs {
		for _, n := range needles {
			if bytes.Contains(r.Value, n) {
				t.Fatalf("record %s@%d of %s holds secret bytes %q", r.Key, r.Offset, st.topics.Endpoints, n)
			}
		}
	}
}

// v1aDeliveryVerifiesWithNode delivers to a v1a endpoint and checks the
// signature the receiver got with Node's own ed25519 (crypto.verify) and
// the public key GetEndpoint serves.
func v1aDeliveryVerifiesWithNode(t *testing.T, st *stack) {
	rx := newReceiver(t, http.StatusOK)
	ep := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, SignatureScheme: hooklinev1.SignatureScheme_SIGNATURE_SCHEME_V1A, EventTypes: []string{"v1a.test"}})
	got, err := st.endpoints().GetEndpoint(st.ctx(), &hooklinev1.GetEndpointRequest{Id: ep.GetEndpoint().GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetSecret() != "" || got.GetPublicKey() != ep.GetPublicKey() || got.GetEndpoint().GetSignatureScheme() != hooklinev1.SignatureScheme_SIGNATURE_SCHEME_V1A {
		t.Fatalf("GetEndpoint = %v: want no secret, the public key %q, scheme V1A", got, ep.GetPublicKey())
	}
	// The only delivery of the stack: its other endpoints take no type
	// published here.
	st.publish("v1a.test", `{"invoice":"in_1"}`)
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

// rotationBeyondTheLimitIsRefused: at most endpoints.MaxActiveSecrets
// secrets sign at once; one more rotation is refused with
// FAILED_PRECONDITION saying to expire one first, and a rotation that
// expires the current secret at once goes through.
func rotationBeyondTheLimitIsRefused(t *testing.T, st *stack) {
	ep := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: "http://127.0.0.1:9/hooks", EventTypes: []string{"none.ever"}})
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

// TestKeyRotationOldRecordsStillOpenRekeyMovesThemAndAMissingKeyHolds
// walks the key rotation of docs/security.md against running services:
// an endpoint sealed under key A still delivers signed once B is put
// first; rekey reseals it under B; a dispatcher whose key file lacks the
// sealing key holds the delivery — no attempt, no dead letter, no crash —
// and once it has B again the held delivery goes out (A stays while
// ingest, not restarted, MACs delivery records under it).
func TestKeyRotationOldRecordsStillOpenRekeyMovesThemAndAMissingKeyHolds(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "secrets.keys")
	writeKeys := func(lines ...string) {
		t.Helper()
		if err := os.WriteFile(keyFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	lineA, lineB, lineC := keyring.NewKeyLine(now.Add(-2*time.Hour)), keyring.NewKeyLine(now.Add(-time.Hour)), keyring.NewKeyLine(now)
	writeKeys(lineA)
	st := startStack(t, func(c *stackConfig) {
		c.ingest.Secrets.KeyFile = keyFile
		c.dispatcher.Secrets.KeyFile = keyFile
		c.dispatcher.OutageRecheck = time.Second // how soon a held delivery looks again
	})
	restart := func(lines ...string) {
		t.Helper()
		writeKeys(lines...)
		st.dispatcher.halt()
		st.dispatcher.start(st, st.newDispatcher(time.Second).Run)
	}
	rx := newReceiver(t, http.StatusOK)
	ep := st.createEndpoint(rx.URL)
	wh, err := standardwebhooks.NewWebhook(ep.GetSecret())
	if err != nil {
		t.Fatal(err)
	}
	delivered := func(n int) {
		t.Helper()
		res := kafkatest.Decode(t, st.readN(st.topics.Results, n), func() *hooklinev1.AttemptResult { return &hooklinev1.AttemptResult{} })
		if last := res[n-1]; last.GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED {
			t.Fatalf("result %d: %v, want DELIVERED", n, last)
		}
		p := rx.got()[n-1]
		if err := wh.Verify(p.body, p.header); err != nil {
			t.Fatalf("delivery %d does not verify with the endpoint's secret: %v", n, err)
		}
	}
	st.publish("invoice.paid", `{"n":1}`)
	delivered(1)

	restart(lineB, lineA) // B seals from now on; A still opens
	st.publish("invoice.paid", `{"n":2}`)
	delivered(2)

	store := endpoints.NewStore()
	stop, _, err := store.Start(st.ctx(), st.kafka)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	keysBA, err := keyring.Parse([]byte(lineB + "\n" + lineA))
	if err != nil {
		t.Fatal(err)
	}
	produce := func(ctx context.Context, r *kgo.Record) error { return hkafka.ProduceAcked(ctx, st.client, r) }
	if stats, err := endpoints.Rekey(st.ctx(), store, keysBA, st.topics.Endpoints, produce, time.Now); err != nil || stats.Rewritten != 1 {
		t.Fatalf("rekey = %+v, %v; want 1 endpoint rewritten", stats, err)
	}
	if sealed := store.Get(ep.GetEndpoint().GetId()).GetSecrets()[0].GetSealed(); sealed.GetKeyId() != keysBA.Current() {
		t.Fatalf("after rekey the secret is sealed under %q, want %q", sealed.GetKeyId(), keysBA.Current())
	}

	// A key file without the sealing key B. It keeps A: ingest, not
	// restarted here, MACs its delivery records under A, and a
	// dispatcher verifies them with the keys it holds (record
	// authentication, docs/security.md).
	restart(lineC, lineA)
	st.publish("invoice.paid", `{"n":3}`)
	held := kafkatest.Decode(t, st.readN(st.topics.Retries, 1), func() *hooklinev1.Delivery { return &hooklinev1.Delivery{} })[0]
	if held.GetKind() != hooklinev1.DeliveryKind_DELIVERY_KIND_DEFERRED || held.GetAttempt() > 1 {
		t.Fatalf("delivery with an unopenable secret: %v, want it held (DEFERRED) with no attempt spent", held)
	}
	if n := len(rx.got()); n != 2 {
		t.Fatalf("the receiver got %d POSTs, want 2: nothing is sent unsigned", n)
	}
	if n := st.endOffsets(st.topics.Dead); n != 0 {
		t.Fatalf("%d dead letters, want none: a missing key holds", n)
	}
	// B back (A kept for ingest's MACs, above): the rekeyed secret
	// opens, and the held delivery goes out.
	restart(lineB, lineA)
	delivered(3)
}

// TestServicesRefuseToStartWithoutASecretsKey: ingest and the dispatcher
// need --secrets-key-file, or --insecure-plaintext-secrets to run
// without one; the error says so.
func TestServicesRefuseToStartWithoutASecretsKey(t *testing.T) {
	ic, err := config.Defaults[ingest.Config]()
	if err != nil {
		t.Fatal(err)
	}
	ic.APIKeys = []string{testTenant + ":key-" + randomHex(16)}
	dc, err := config.Defaults[dispatcher.Config]()
	if err != nil {
		t.Fatal(err)
	}
	_, ierr := ingest.New(ic)
	_, derr := dispatcher.New(dc)
	for name, err := range map[string]error{"ingest": ierr, "dispatcher": derr} {
		if !errors.Is(err, keyring.ErrNoKeyFile) || !strings.Contains(err.Error(), "--secrets-key-file") || !strings.Contains(err.Error(), "--insecure-plaintext-secrets") {
			t.Errorf("%s without a key: %v; want an error naming --secrets-key-file and --insecure-plaintext-secrets", name, err)
		}
	}
	ic.Secrets.InsecurePlaintext, dc.Secrets.InsecurePlaintext = true, true
	if _, err := ingest.New(ic); err != nil {
		t.Errorf("ingest with --insecure-plaintext-secrets: %v", err)
	}
	if _, err := dispatcher.New(dc); err != nil {
		t.Errorf("dispatcher with --insecure-plaintext-secrets: %v", err)
	}
}

// v1aKeysRotate: rotating a v1a endpoint makes a new key pair and keeps
// the old public key served while it still signs; rotating a v1
// endpoint with SIGNATURE_SCHEME_V1A switches it, its old HMAC secret
// signing beside the new key during the grace period.
func v1aKeysRotate(t *testing.T, st *stack) {
	v1a := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: "http://127.0.0.1:9/hooks", EventTypes: []string{"none.ever"}, SignatureScheme: hooklinev1.SignatureScheme_SIGNATURE_SCHEME_V1A})
	rot, err := st.endpoints().RotateEndpointSecret(st.ctx(), &hooklinev1.RotateEndpointSecretRequest{Id: v1a.GetEndpoint().GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if rot.GetSecret() != "" || rot.GetPublicKey() == "" || rot.GetPublicKey() == v1a.GetPublicKey() {
		t.Fatalf("v1a rotation answered secret %q, public key %q (was %q): want a new public key only", rot.GetSecret(), rot.GetPublicKey(), v1a.GetPublicKey())
	}
	got, err := st.endpoints().GetEndpoint(st.ctx(), &hooklinev1.GetEndpointRequest{Id: v1a.GetEndpoint().GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if keys := got.GetPublicKeys(); len(keys) != 2 || keys[0] != rot.GetPublicKey() || keys[1] != v1a.GetPublicKey() {
		t.Fatalf("public_keys %v, want the new then the old key", keys)
	}

	v1 := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: "http://127.0.0.1:9/hooks", EventTypes: []string{"none.ever"}})
	sw, err := st.endpoints().RotateEndpointSecret(st.ctx(), &hooklinev1.RotateEndpointSecretRequest{Id: v1.GetEndpoint().GetId(), SignatureScheme: hooklinev1.SignatureScheme_SIGNATURE_SCHEME_V1A})
	if err != nil {
		t.Fatal(err)
	}
	if sw.GetEndpoint().GetSignatureScheme() != hooklinev1.SignatureScheme_SIGNATURE_SCHEME_V1A || sw.GetPublicKey() == "" || sw.GetSecret() != "" {
		t.Fatalf("switch to v1a: %v", sw)
	}
	if _, err := st.endpoints().RotateEndpointSecret(st.ctx(), &hooklinev1.RotateEndpointSecretRequest{Id: v1.GetEndpoint().GetId(), Secret: sign.GenerateSecret(), SignatureScheme: hooklinev1.SignatureScheme_SIGNATURE_SCHEME_V1A}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a whsec_ secret for scheme V1A: %v, want INVALID_ARGUMENT", err)
	}
}
