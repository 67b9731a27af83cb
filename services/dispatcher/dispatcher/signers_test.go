package dispatcher

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/keyring"
	"github.com/hookline/hookline/sdk/sign"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestSignerCacheOpensSecretsOnlyWhenTheActiveSetChanges(t *testing.T) {
	s := newTestService(t)
	now := time.Now()
	ep := endpoint("http://127.0.0.1:1", sign.GenerateSecret())
	first, err := s.signers.get(ep, now)
	if err != nil {
		t.Fatal(err)
	}
	// A new version of the record (a pause, an update) with the same
	// sealed secrets keeps the cached Signer: nothing is opened again.
	paused := proto.Clone(ep).(*hooklinev1.EndpointRecord)
	paused.Version++
	if again, _ := s.signers.get(paused, now); again != first {
		t.Fatal("an unchanged secret was opened again")
	}
	// A rotation (or a rekey: same secret, new seal) makes a new one.
	rotated := proto.Clone(ep).(*hooklinev1.EndpointRecord)
	rotated.Secrets[0].ExpiresAt = timestamppb.New(now.Add(time.Hour))
	next := endpoint("", sign.GenerateSecret()).Secrets[0]
	rotated.Secrets = append([]*hooklinev1.EndpointSecret{next}, rotated.Secrets...)
	if r, _ := s.signers.get(rotated, now); r == first {
		t.Fatal("a rotation kept the old Signer")
	}
	// Once the old secret's grace is over, the active set changes again.
	if late, _ := s.signers.get(rotated, now.Add(2*time.Hour)); late == first {
		t.Fatal("an expired secret kept signing")
	}
}

func TestUnopenableSecretHoldsTheDeliveryWithoutAnAttempt(t *testing.T) {
	otherKeys, err := keyring.Parse([]byte(keyring.NewKeyLine(time.Unix(1, 0))))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		sealed func() *hooklinev1.EndpointSecret
	}{
		{"key id not in the key file", func() *hooklinev1.EndpointSecret {
			es, _ := otherKeys.Seal("t", "ep_1", sign.GenerateSecret(), time.Unix(0, 0))
			return es
		}},
		{"secret moved from another endpoint", func() *hooklinev1.EndpointSecret {
			es, _ := testKeys.Seal("t", "ep_2", sign.GenerateSecret(), time.Unix(0, 0))
			return es
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rx := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("no request may be sent") }))
			defer rx.Close()
			s := newTestService(t)
			ep := endpoint(rx.URL)
			ep.Secrets = []*hooklinev1.EndpointSecret{tt.sealed()}
			s.store.Put(ep)
			out := s.handler.handleSafely(t.Context(), deliveryRecord(t, s))
			if len(out) != 1 || out[0].Topic != s.topics.Retries {
				t.Fatalf("want the delivery held on %s, got %+v", s.topics.Retries, out)
			}
			var d hooklinev1.Delivery
			if err := hkafka.Decode(out[0], &d); err != nil {
				t.Fatal(err)
			}
			if d.GetKind() != hooklinev1.DeliveryKind_DELIVERY_KIND_DEFERRED || d.GetAttempt() != 3 || d.GetHeldSince() == nil || !d.GetDueAt().AsTime().After(s.now()) {
				t.Fatalf("held delivery %v: want DEFERRED, attempt 3 unspent, held since set, due later", &d)
			}
			if header(out[0], headerFaults) != "" {
				t.Fatal("an unopenable secret counted as a worker fault")
			}
		})
	}
}
