package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/credentials/insecure"
)

// TestRepeatedFlagKeepsEveryValue: --metadata may be repeated, in either
// form, and comma-separated; a "--" ends the flags.
func TestRepeatedFlagKeepsEveryValue(t *testing.T) {
	got := repeatedFlag([]string{"--metadata", "region=eu", "--type", "a.b", "-metadata=tier=gold,plan=pro", "--", "--metadata", "x=y"}, "metadata")
	if want := "region=eu tier=gold plan=pro"; strings.Join(got, " ") != want {
		t.Fatalf("got %q, want %s", got, want)
	}
}

// TestEndpointTryAndTransformationFile: against hookline dev, `endpoint
// create --transformation-file` saves the script; `endpoint try` runs
// the endpoint's script and a given filter on a sample event (repeated
// --metadata) and prints the match, the webhook as JSON and the time; a
// throwing script exits non-zero with its error; `endpoint update
// --transformation-file` with an empty file removes the script.
func TestEndpointTryAndTransformationFile(t *testing.T) {
	dev := startDev(t, t.TempDir())
	waitServing(t, dev.grpc, insecure.NewCredentials())
	env := devEnv(dev)
	rx := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer rx.Close()
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cli := func(args ...string) (string, error) {
		t.Helper()
		var out bytes.Buffer
		err := run(t.Context(), args, &out, env)
		return out.String(), err
	}
	script := `function handler(w) { w.payload = {text: "paid " + w.payload.amount}; return w }`
	out, err := cli("endpoint", "create", "--url", rx.URL, "--transformation-file", file("shape.js", script))
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		Endpoint struct{ ID, Transformation string }
	}
	if err := json.Unmarshal([]byte(out), &created); err != nil || created.Endpoint.Transformation != script {
		t.Fatalf("endpoint create printed %s (%v); want the endpoint with its transformation", out, err)
	}
	id := created.Endpoint.ID

	out, err = cli("endpoint", "try", "--endpoint", id, "--type", "invoice.paid", "--payload", `{"amount": 15}`,
		"--metadata", "region=eu", "--metadata", "tier=gold", "--filter", `metadata.region == "eu" && metadata.tier == "gold"`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "filter: match (") || !strings.Contains(out, "transformation: ok (") || !strings.Contains(out, `"payload": {`) || !strings.Contains(out, `"text": "paid 15"`) || !strings.Contains(out, rx.URL) {
		t.Fatalf("endpoint try printed:\n%s\nwant a match, the transformed webhook to %s and the times", out, rx.URL)
	}

	out, err = cli("endpoint", "try", "--type", "invoice.paid", "--payload", `{}`, "--transformation-file", file("throw.js", `function handler(w) { throw new Error("no customer") }`))
	if err == nil || !strings.Contains(err.Error(), "no customer") || !strings.Contains(out, "transformation: failed") {
		t.Fatalf("a throwing script: printed %q, err %v; want a failure naming the error", out, err)
	}

	out, err = cli("endpoint", "update", id, "--transformation-file", file("empty.js", ""))
	if err != nil {
		t.Fatal(err)
	}
	var updated struct {
		Endpoint struct{ Transformation *string }
	}
	if err := json.Unmarshal([]byte(out), &updated); err != nil || (updated.Endpoint.Transformation != nil && *updated.Endpoint.Transformation != "") {
		t.Fatalf("update with an empty file printed %s (%v); want the transformation removed", out, err)
	}
	if _, err := cli("endpoint", "try", "--endpoint", id, "--type", "invoice.paid"); err == nil || !strings.Contains(err.Error(), "neither a filter nor a transformation") {
		t.Fatalf("try on an endpoint left with nothing: %v; want FAILED_PRECONDITION saying so", err)
	}
}
