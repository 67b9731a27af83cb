package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc/credentials/insecure"
)

// TestBatchFlagsNameOnlyTheSettingsGiven: each --batch-* flag given is
// its own mask path (the others are kept); --batch-max-events 0 clears
// batch, alone.
func TestBatchFlagsNameOnlyTheSettingsGiven(t *testing.T) {
	noEnv := func(string) string { return "" }
	tests := []struct {
		give      []string
		wantPaths string
		wantBatch string
		wantErr   string
	}{
		{[]string{"--description", "x"}, "", "<nil>", ""},
		{[]string{"--batch-max-events", "50"}, "batch.max_events", "max_events:50", ""},
		{[]string{"--batch-max-wait=0s", "--batch-max-bytes", "1024"}, "batch.max_wait batch.max_bytes", "max_bytes:1024 max_wait:{}", ""},
		{[]string{"--batch-max-events", "0"}, "batch", "<nil>", ""},
		{[]string{"--batch-max-events", "0", "--batch-max-wait", "2s"}, "", "", "give no other --batch-* flag"},
	}
	for _, tt := range tests {
		var f endpointFlags
		if _, err := parse("endpoint update", &f, tt.give, io.Discard, noEnv); err != nil {
			t.Fatal(err)
		}
		b, paths, err := f.batchUpdate(tt.give)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: err %v, want %q", tt.give, err, tt.wantErr)
			}
			continue
		}
		got := "<nil>"
		if b != nil {
			got = strings.Join(strings.Fields(b.String()), " ")
		}
		if err != nil || strings.Join(paths, " ") != tt.wantPaths || got != tt.wantBatch {
			t.Errorf("%q: paths %q batch %s, %v; want %q, %s", tt.give, paths, got, err, tt.wantPaths, tt.wantBatch)
		}
	}
}

// TestEndpointUpdateSetsShowsAndClearsBatchSettings: against hookline
// dev, `endpoint create` and `endpoint update --batch-*` set the batch
// settings, get and list print them, one flag changes one setting, ingest's refusal is
// printed as it says what to fix, and --batch-max-events 0 turns
// batching off.
func TestEndpointUpdateSetsShowsAndClearsBatchSettings(t *testing.T) {
	dev := startDev(t, t.TempDir())
	waitServing(t, dev.grpc, insecure.NewCredentials())
	env := devEnv(dev)
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
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
	batchOf := func(m map[string]any) map[string]any {
		b, _ := m["endpoint"].(map[string]any)["batch"].(map[string]any)
		return b
	}
	batched, err := cli("endpoint", "create", "--url", rx.URL, "--batch-max-events", "20", "--batch-max-wait", "0s")
	if err != nil {
		t.Fatal(err)
	}
	if b := batchOf(batched); b["max_events"] != float64(20) || b["max_wait"] != "0s" {
		t.Fatalf("create with --batch-* printed batch %v, want max_events 20, max_wait 0s", b)
	}
	if _, err := cli("endpoint", "create", "--url", rx.URL, "--batch-max-events", "1001"); err == nil || !strings.Contains(err.Error(), "batch.max_events: must be 2 to 1000, got 1001") {
		t.Fatalf("create with --batch-max-events 1001: %v, want ingest's answer saying what to fix", err)
	}
	created, err := cli("endpoint", "create", "--url", rx.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := created["endpoint"].(map[string]any)["batch"]; ok {
		t.Fatalf("create without --batch-* printed a batch: %v", created)
	}
	id := created["endpoint"].(map[string]any)["id"].(string)

	upd, err := cli("endpoint", "update", id, "--batch-max-events", "50", "--batch-max-wait", "250ms")
	if err != nil {
		t.Fatal(err)
	}
	if b := batchOf(upd); b["max_events"] != float64(50) || b["max_wait"] != "0.250s" {
		t.Fatalf("update printed batch %v, want max_events 50, max_wait 0.250s", b)
	}
	upd, err = cli("endpoint", "update", id, "--batch-max-bytes", "65536")
	if err != nil {
		t.Fatal(err)
	}
	if b := batchOf(upd); b["max_events"] != float64(50) || b["max_bytes"] != float64(65536) || b["max_wait"] != "0.250s" {
		t.Fatalf("update of max bytes printed batch %v, want the other settings kept", b)
	}
	got, err := cli("endpoint", "get", id)
	if err != nil || batchOf(got)["max_bytes"] != float64(65536) {
		t.Fatalf("endpoint get: %v, batch %v", err, batchOf(got))
	}
	list, err := cli("endpoint", "list")
	eps, _ := list["endpoints"].([]any)
	if err != nil || len(eps) != 2 || eps[0].(map[string]any)["batch"] == nil || eps[1].(map[string]any)["batch"] == nil {
		t.Fatalf("endpoint list: %v, %v; want both endpoints with their batch", err, list)
	}
	if _, err := cli("endpoint", "update", id, "--batch-max-events", "1"); err == nil || !strings.Contains(err.Error(), "batch.max_events: must be 2 to 1000, got 1") {
		t.Fatalf("--batch-max-events 1: %v, want ingest's answer saying what to fix", err)
	}
	cleared, err := cli("endpoint", "update", id, "--batch-max-events", "0")
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := cleared["endpoint"].(map[string]any)["batch"]; ok {
		t.Fatalf("--batch-max-events 0 left batch %v", b)
	}
}
