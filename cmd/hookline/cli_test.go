package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// TestFlagsGoBeforeOrAfterPositionalArguments: every command takes its
// flags on either side of its positional arguments, as the operator
// guide writes them (`endpoint pause ID --reason R`), and `--` ends the
// flags.
func TestFlagsGoBeforeOrAfterPositionalArguments(t *testing.T) {
	noEnv := func(string) string { return "" }
	tests := []struct {
		give       []string
		wantReason string
		wantRest   []string
	}{
		{[]string{"--reason", "maintenance", "ep_1"}, "maintenance", []string{"ep_1"}},
		{[]string{"ep_1", "--reason", "maintenance"}, "maintenance", []string{"ep_1"}},
		{[]string{"ep_1", "--reason=maintenance", "ep_2"}, "maintenance", []string{"ep_1", "ep_2"}},
		{[]string{"ep_1", "--", "--reason", "x"}, "", []string{"ep_1", "--reason", "x"}},
	}
	for _, tt := range tests {
		var f endpointFlags
		rest, err := parse("endpoint pause", &f, tt.give, io.Discard, noEnv)
		if err != nil || f.Reason != tt.wantReason || strings.Join(rest, " ") != strings.Join(tt.wantRest, " ") {
			t.Errorf("parse %q: reason %q, rest %q, %v; want reason %q, rest %q", tt.give, f.Reason, rest, err, tt.wantReason, tt.wantRest)
		}
	}
}

// TestCLIPrintsWhatAPersonCanRead: against hookline dev, `endpoint pause
// ID --reason R` pauses with the reason; `endpoint test` against a
// receiver answering 500 exits non-zero with the outcome; output is the
// HTTP API's snake_case JSON, with UTF-8 payloads and response excerpts
// as text rather than base64.
func TestCLIPrintsWhatAPersonCanRead(t *testing.T) {
	dev := startDev(t, t.TempDir())
	waitServing(t, dev.grpc, insecure.NewCredentials())
	env := devEnv(dev)
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "database is down — réessayez")
	}))
	defer rx.Close()
	cli := func(args ...string) (map[string]any, error) {
		t.Helper()
		var out bytes.Buffer
		err := run(t.Context(), args, &out, env)
		var m map[string]any
		if out.Len() > 0 {
			if jerr := json.Unmarshal(out.Bytes(), &m); jerr != nil {
				t.Fatalf("hookline %q printed no JSON object: %v\n%s", args, jerr, out.String())
			}
		}
		return m, err
	}
	created, err := cli("endpoint", "create", "--url", rx.URL+"/hooks")
	if err != nil {
		t.Fatal(err)
	}
	ep, _ := created["endpoint"].(map[string]any)
	id, _ := ep["id"].(string)
	if id == "" || created["endpoint"].(map[string]any)["created_at"] == nil {
		t.Fatalf("endpoint create printed %v: want snake_case keys (created_at) as the HTTP API answers", created)
	}

	paused, err := cli("endpoint", "pause", id, "--reason", "maintenance")
	if err != nil {
		t.Fatalf("endpoint pause ID --reason: %v", err)
	}
	if got := paused["endpoint"].(map[string]any)["paused_reason"]; got != "maintenance" {
		t.Fatalf("endpoint pause printed %v, want paused_reason maintenance", paused)
	}
	if _, err := cli("endpoint", "resume", id); err != nil {
		t.Fatal(err)
	}

	tested, err := cli("endpoint", "test", id)
	if err == nil || !strings.Contains(err.Error(), "500") {
		t.Fatalf("endpoint test against a 500: err %v, want a failure naming the status", err)
	}
	res, _ := tested["result"].(map[string]any)
	if got, _ := res["response_excerpt"].(string); got != "database is down — réessayez" {
		t.Fatalf("endpoint test printed response_excerpt %q, want the text the receiver answered (%v)", got, tested)
	}

	pub, err := cli("publish", "--type", "invoice.paid", "--data", `{"invoice":"in_1","amount":4200}`)
	if err != nil {
		t.Fatal(err)
	}
	evID, _ := pub["event_id"].(string)
	if evID == "" {
		t.Fatalf("publish printed %v, want event_id", pub)
	}
	ev, err := cli("events", "get", evID)
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(ev["payload"])
	if string(payload) != `{"amount":4200,"invoice":"in_1"}` {
		t.Fatalf("events get printed payload %s, want the JSON document itself", payload)
	}
}

// TestCallErrExplainsAMessageTooLargeForIngest: gRPC's transport refusal
// of a message over ingest's largest (far over --max-payload-bytes)
// says which setting limits payloads.
func TestCallErrExplainsAMessageTooLargeForIngest(t *testing.T) {
	err := callErr(status.Error(codes.ResourceExhausted, "grpc: received message larger than max (20971530 vs. 5242880)"))
	if !strings.Contains(err.Error(), "--max-payload-bytes") {
		t.Fatalf("callErr = %v; want it to name --max-payload-bytes", err)
	}
}
