package endpoints_test

import (
	"context"
	"strings"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/config"
	"github.com/hookline/hookline/platform/endpoints"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/keyring"
	"github.com/hookline/hookline/sdk/sign"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestRekeyRewritesEveryEndpointUnderTheNewKeyWithoutLosingAConcurrentChange
// seals endpoints (their signing secrets and receiver credentials) under
// an old key (and one in the clear, as written before sealing existed), rotates the key file, and runs rekey while
// another writer changes an endpoint in between: every endpoint ends
// under the new key, opens with the new key alone, and the concurrent
// change survives.
func TestRekeyRewritesEveryEndpointUnderTheNewKeyWithoutLosingAConcurrentChange(t *testing.T) {
	ctx := t.Context()
	kc, err := config.Defaults[hkafka.Config]()
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, kc.Topics().Endpoints))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	kc.Brokers = cluster.ListenAddrs()
	topic := kc.Topics().Endpoints
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	store := endpoints.NewStore()
	stop, _, err := store.Start(ctx, kc)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	produce := func(ctx context.Context, r *kgo.Record) error { return hkafka.ProduceAcked(ctx, cl, r) }
	write := func(rec *hooklinev1.EndpointRecord) {
		t.Helper()
		r, err := hkafka.Record(topic, rec.GetEndpoint().GetId(), rec)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Write(ctx, r, produce); err != nil {
			t.Fatal(err)
		}
	}

	now := time.Now()
	oldLine, newLine := keyring.NewKeyLine(now.Add(-time.Hour)), keyring.NewKeyLine(now)
	oldKeys := parseKeys(t, oldLine)
	secrets := map[string]string{}
	for _, id := range []string{"ep_sealed", "ep_clear", "ep_rotating"} {
		secrets[id] = sign.GenerateSecret()
		rec := &hooklinev1.EndpointRecord{Endpoint: &hooklinev1.Endpoint{Id: id, TenantId: "acme"}, Version: 1}
		ring := oldKeys
		if id == "ep_clear" {
			ring = keyring.Plaintext()
		}
		es, err := ring.Seal("acme", id, secrets[id], now)
		if err != nil {
			t.Fatal(err)
		}
		rec.Secrets = []*hooklinev1.EndpointSecret{es}
		// A receiver credential (a secret header's value) is resealed too.
		rec.Credentials = []*hooklinev1.EndpointCredential{ring.SealCredential("acme", id, "header:x-api-key", "hdr-"+id)}
		if id == "ep_rotating" {
			expired, _ := oldKeys.Seal("acme", id, sign.GenerateSecret(), now.Add(-48*time.Hour))
			expired.ExpiresAt = timestamppb.New(now.Add(-time.Hour))
			rec.Secrets = append(rec.Secrets, expired)
		}
		write(rec)
	}

	newKeys := parseKeys(t, newLine+"\n"+oldLine)
	raced := false
	racing := func(ctx context.Context, r *kgo.Record) error {
		if !raced && string(r.Key) == "ep_sealed" {
			// Another writer's change lands first: rekey's record loses.
			raced = true
			ch := proto.Clone(store.Get("ep_sealed")).(*hooklinev1.EndpointRecord)
			ch.Endpoint.Description = "changed concurrently"
			ch.Version++
			write(ch)
		}
		return produce(ctx, r)
	}
	st, err := endpoints.Rekey(ctx, store, newKeys, topic, racing, time.Now)
	if err != nil || st.Rewritten != 3 || st.Current != 0 || len(st.Failed) != 0 {
		t.Fatalf("rekey = %+v, %v; want 3 rewritten", st, err)
	}
	if !raced {
		t.Fatal("the concurrent change never happened: the test proves nothing")
	}

	newOnly := parseKeys(t, newLine)
	last := lastRecords(t, kc, topic)
	for id, want := range secrets {
		rec := last[id]
		if rec == nil || len(rec.GetSecrets()) != 1 {
			t.Fatalf("%s: last record %v, want one secret (the expired one dropped)", id, rec)
		}
		es := rec.GetSecrets()[0]
		if es.GetSecret() != "" || es.GetSealed().GetKeyId() != newKeys.Current() {
			t.Fatalf("%s: secret not sealed under the new key %q: %v", id, newKeys.Current(), es)
		}
		if got, err := newOnly.Open("acme", id, es); err != nil || got != want {
			t.Fatalf("%s: with the new key alone, Open = %q, %v", id, got, err)
		}
		cr := rec.GetCredentials()
		if len(cr) != 1 || cr[0].GetSecret() != "" || cr[0].GetSealed().GetKeyId() != newKeys.Current() {
			t.Fatalf("%s: credential not sealed under the new key: %v", id, cr)
		}
		if got, err := newOnly.OpenCredential("acme", id, cr[0]); err != nil || got != "hdr-"+id {
			t.Fatalf("%s: with the new key alone, OpenCredential = %q, %v", id, got, err)
		}
	}
	if d := last["ep_sealed"].GetEndpoint().GetDescription(); d != "changed concurrently" {
		t.Fatalf("the concurrent change was lost: description %q", d)
	}

	// Run again: nothing left to do.
	if st, err := endpoints.Rekey(ctx, store, newKeys, topic, produce, time.Now); err != nil || st.Rewritten != 0 || st.Current != 3 {
		t.Fatalf("second rekey = %+v, %v; want 3 already current", st, err)
	}
	// A key file without the old key cannot rekey what it sealed.
	fresh := parseKeys(t, keyring.NewKeyLine(now.Add(time.Hour)))
	st, err = endpoints.Rekey(ctx, store, fresh, topic, produce, time.Now)
	if err != nil || len(st.Failed) != 3 || !strings.Contains(st.Failed[0].Error(), "add that key back") {
		t.Fatalf("rekey without the sealing key = %+v, %v; want 3 clear failures", st, err)
	}
}

func parseKeys(t *testing.T, file string) *keyring.Keyring {
	t.Helper()
	k, err := keyring.Parse([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// lastRecords reads topic from its start to its end and returns each
// key's last record.
func lastRecords(t *testing.T, kc hkafka.Config, topic string) map[string]*hooklinev1.EndpointRecord {
	t.Helper()
	out := map[string]*hooklinev1.EndpointRecord{}
	all, err := hkafka.ReadAll(t.Context(), kc, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range all {
		rec := new(hooklinev1.EndpointRecord)
		if err := proto.Unmarshal(r.Value, rec); err != nil {
			t.Fatal(err)
		}
		out[string(r.Key)] = rec
	}
	return out
}
