package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/keyring"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
)

// TestDevKeepsItsSecretsKeyAcrossRestartsAndRekeys: hookline dev makes
// one key file in its data dir (owner-only) and reuses it, so a secret
// sealed before a restart opens after it; with a new key put first,
// `hookline secrets rekey` reseals the endpoint and its secret still
// opens.
func TestDevKeepsItsSecretsKeyAcrossRestartsAndRekeys(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "secrets.keys")
	d := startDev(t, dir)
	waitServing(t, d.grpc, insecure.NewCredentials())
	var out bytes.Buffer
	if err := run(t.Context(), []string{"endpoint", "create", "--url", "http://127.0.0.1:9/hooks"}, &out, devEnv(d)); err != nil {
		t.Fatal(err)
	}
	var created hooklinev1.CreateEndpointResponse
	if err := protojson.Unmarshal(out.Bytes(), &created); err != nil {
		t.Fatal(err)
	}
	d.stop()
	fi, err := os.Stat(keyFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("dev key file: %v, %v; want it made owner-only", fi, err)
	}
	first, _ := os.ReadFile(keyFile)

	secretAfterRestart := func() string {
		t.Helper()
		d := startDev(t, dir)
		defer d.stop()
		waitServing(t, d.grpc, insecure.NewCredentials())
		var out bytes.Buffer
		if err := run(t.Context(), []string{"endpoint", "get", created.GetEndpoint().GetId()}, &out, devEnv(d)); err != nil {
			t.Fatal(err)
		}
		var got hooklinev1.GetEndpointResponse
		if err := protojson.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		return got.GetSecret()
	}
	if got := secretAfterRestart(); got != created.GetSecret() {
		t.Fatalf("after a restart the secret reads %q, want %q", got, created.GetSecret())
	}
	if again, _ := os.ReadFile(keyFile); !bytes.Equal(again, first) {
		t.Fatal("a restart replaced the dev key file")
	}

	// Rotate: a new key first, then rekey through dev's Kafka.
	newLine := keyring.NewKeyLine(time.Now().Add(time.Hour))
	if err := os.WriteFile(keyFile, append([]byte(newLine+"\n"), first...), 0o600); err != nil {
		t.Fatal(err)
	}
	d = startDev(t, dir)
	waitServing(t, d.grpc, insecure.NewCredentials())
	out.Reset()
	if err := run(t.Context(), []string{"secrets", "rekey", "--secrets-key-file", keyFile}, &out, devEnv(d)); err != nil {
		t.Fatalf("secrets rekey: %v: %s", err, out.String())
	}
	if !strings.Contains(out.String(), "1 endpoints rewritten") {
		t.Fatalf("secrets rekey printed %q, want 1 endpoint rewritten", out.String())
	}
	d.stop()
	// Only the new key left: the resealed secret opens.
	if err := os.WriteFile(keyFile, []byte(newLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := secretAfterRestart(); got != created.GetSecret() {
		t.Fatalf("after rekey and removing the old key the secret reads %q, want %q", got, created.GetSecret())
	}
}

// devEnv is the client environment of a dev run.
func devEnv(d devAddrs) func(string) string {
	env := map[string]string{"HOOKLINE_ADDR": d.grpc, "HOOKLINE_API_KEY": d.apiKey, "HOOKLINE_KAFKA_BROKERS": d.kafka}
	return func(k string) string { return env[k] }
}
