package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/services/ingest/apikey"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// lineWriter hands each complete line written to it to fn.
type lineWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
	fn  func(string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.WriteString(line)
			return len(p), nil
		}
		w.fn(strings.TrimSpace(line))
	}
}

// devAddrs is where a hookline dev started by startDev listens; stop
// ends it (before the test's end, to restart it).
type devAddrs struct {
	grpc, kafka, metrics, apiKey string
	banner                       string // every line it printed up to its last
	stop                         func()
}

// startDev runs hookline dev on free ports with its data in dir, plus
// args, until the test ends or stop, and returns its addresses once it
// printed them.
func startDev(t *testing.T, dir string, args ...string) devAddrs {
	t.Helper()
	pr, pw := io.Pipe()
	ctx, stop := context.WithCancel(t.Context())
	devDone := make(chan error, 1)
	noEnv := func(string) string { return "" }
	go func() {
		devDone <- run(ctx, append([]string{"dev", "--data-dir", dir, "--grpc-addr", "127.0.0.1:0", "--kafka-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--console-addr", "127.0.0.1:0", "--log-level", "warn"}, args...), pw, noEnv)
		pw.Close()
	}()
	var a devAddrs
	var once sync.Once
	a.stop = func() {
		once.Do(func() {
			stop()
			if err := <-devDone; err != nil {
				t.Errorf("hookline dev: %v", err)
			}
		})
	}
	t.Cleanup(a.stop)
	sc := bufio.NewScanner(pr)
	var banner strings.Builder
	for sc.Scan() {
		banner.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "results tail") {
			break // the banner's last line
		}
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 3 && f[0] == "ingest" && f[1] == "gRPC":
			a.grpc = f[2]
		case len(f) >= 2 && f[0] == "Kafka":
			a.kafka = f[1]
		case len(f) >= 2 && f[0] == "metrics":
			a.metrics = f[1]
		}
	}
	a.banner = banner.String()
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if a.grpc == "" || a.kafka == "" {
		t.Fatalf("hookline dev did not print its addresses (grpc %q, kafka %q)", a.grpc, a.kafka)
	}
	key, err := os.ReadFile(filepath.Join(dir, "api-key"))
	if err != nil {
		t.Fatal(err)
	}
	a.apiKey = strings.TrimSpace(string(key))
	return a
}

// TestDevQuickStart walks the README's quick start in process: hookline
// dev on free ports, endpoint create, publish, results tail.
func TestDevQuickStart(t *testing.T) {
	dev := startDev(t, t.TempDir())
	grpcAddr, kafkaAddr, metricsURL := dev.grpc, dev.kafka, dev.metrics
	waitServing(t, grpcAddr, insecure.NewCredentials())
	key := dev.apiKey
	env := map[string]string{"HOOKLINE_ADDR": grpcAddr, "HOOKLINE_API_KEY": key, "HOOKLINE_KAFKA_BROKERS": kafkaAddr}
	getenv := func(k string) string { return env[k] }

	var posts atomic.Int32
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rx.Close()

	var out bytes.Buffer
	if err := run(t.Context(), []string{"endpoint", "create", "--url", rx.URL + "/webhooks"}, &out, getenv); err != nil {
		t.Fatal(err)
	}
	var created hooklinev1.CreateEndpointResponse
	if err := protojson.Unmarshal(out.Bytes(), &created); err != nil || !strings.HasPrefix(created.GetSecret(), "whsec_") {
		t.Fatalf("endpoint create printed %q (%v)", out.String(), err)
	}
	out.Reset()
	if err := run(t.Context(), []string{"publish", "--type", "invoice.paid", "--data", `{"amount":4200}`}, &out, getenv); err != nil {
		t.Fatal(err)
	}
	var pub hooklinev1.PublishEventResponse
	if err := protojson.Unmarshal(out.Bytes(), &pub); err != nil || len(pub.GetDeliveries()) != 1 {
		t.Fatalf("publish printed %q (%v)", out.String(), err)
	}

	tailCtx, stopTail := context.WithTimeout(t.Context(), time.Minute)
	defer stopTail()
	var delivered atomic.Bool
	w := &lineWriter{fn: func(line string) {
		var res hooklinev1.AttemptResult
		if protojson.Unmarshal([]byte(line), &res) == nil && res.GetEventId() == pub.GetEventId() &&
			res.GetState() == hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED {
			delivered.Store(true)
			stopTail()
		}
	}}
	if err := run(tailCtx, []string{"results", "tail", "--from-start"}, w, getenv); err != nil {
		t.Fatal(err)
	}
	if !delivered.Load() {
		t.Fatal("results tail never showed the delivery as DELIVERED")
	}
	if n := posts.Load(); n != 1 {
		t.Fatalf("receiver got %d POSTs, want 1", n)
	}
	// The delivery is counted on dev's /metrics.
	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `hookline_dispatcher_deliveries_total{hookline_delivery_state="delivered"`) {
		t.Fatalf("%s has no delivered delivery:\n%s", metricsURL, body)
	}

	out.Reset()
	dlv := pub.GetDeliveries()[0].GetDeliveryId()
	if err := run(t.Context(), []string{"deliveries", "get", dlv}, &out, getenv); err != nil {
		t.Fatal(err)
	}
	var got hooklinev1.GetDeliveryResponse
	if err := protojson.Unmarshal(out.Bytes(), &got); err != nil || got.GetDelivery().GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED || len(got.GetAttempts()) != 1 {
		t.Fatalf("deliveries get printed %q (%v)", out.String(), err)
	}
	out.Reset()
	if err := run(t.Context(), []string{"deliveries", "list", "--event", pub.GetEventId(), "--state", "delivered"}, &out, getenv); err != nil {
		t.Fatal(err)
	}
	var listed hooklinev1.ListDeliveriesResponse
	if err := protojson.Unmarshal(out.Bytes(), &listed); err != nil || len(listed.GetDeliveries()) != 1 || listed.GetDeliveries()[0].GetDeliveryId() != dlv {
		t.Fatalf("deliveries list printed %q (%v)", out.String(), err)
	}
	// The history's search from the command line: by type and time, a
	// page at a time, and events.
	out.Reset()
	if err := run(t.Context(), []string{"deliveries", "list", "--type", "invoice.paid", "--since", "1h", "--limit", "1"}, &out, getenv); err != nil {
		t.Fatal(err)
	}
	listed.Reset()
	if err := protojson.Unmarshal(out.Bytes(), &listed); err != nil || len(listed.GetDeliveries()) != 1 || listed.GetDeliveries()[0].GetDeliveryId() != dlv {
		t.Fatalf("deliveries list --type --since --limit 1 printed %q (%v)", out.String(), err)
	}
	out.Reset()
	if err := run(t.Context(), []string{"deliveries", "list", "--type", "other.type"}, &out, getenv); err != nil {
		t.Fatal(err)
	}
	listed.Reset()
	if err := protojson.Unmarshal(out.Bytes(), &listed); err != nil || len(listed.GetDeliveries()) != 0 {
		t.Fatalf("deliveries list --type other.type printed %q (%v)", out.String(), err)
	}
	out.Reset()
	if err := run(t.Context(), []string{"events", "list", "--type", "invoice.paid", "--until", "0s"}, &out, getenv); err != nil {
		t.Fatal(err)
	}
	var events hooklinev1.ListEventsResponse
	if err := protojson.Unmarshal(out.Bytes(), &events); err != nil || len(events.GetEvents()) != 1 || events.GetEvents()[0].GetEventId() != pub.GetEventId() {
		t.Fatalf("events list printed %q (%v)", out.String(), err)
	}
	out.Reset()
	if err := run(t.Context(), []string{"events", "get", pub.GetEventId()}, &out, getenv); err != nil {
		t.Fatal(err)
	}
	// The payload prints as the JSON document itself (not base64), so
	// the answer is read as plain JSON.
	var event struct {
		Deliveries []json.RawMessage `json:"deliveries"`
		Payload    json.RawMessage   `json:"payload"`
	}
	if err := json.Unmarshal(out.Bytes(), &event); err != nil || len(event.Deliveries) != 1 || string(event.Payload) == "" {
		t.Fatalf("events get printed %q (%v)", out.String(), err)
	}
	out.Reset()
	if err := run(t.Context(), []string{"resend", dlv}, &out, getenv); err != nil {
		t.Fatal(err)
	}
	var resent hooklinev1.ResendDeliveryResponse
	if err := protojson.Unmarshal(out.Bytes(), &resent); err != nil || resent.GetAttempt() != 2 {
		t.Fatalf("resend printed %q (%v)", out.String(), err)
	}
	out.Reset()
	if err := run(t.Context(), []string{"endpoint", "test", created.GetEndpoint().GetId()}, &out, getenv); err != nil {
		t.Fatal(err)
	}
	var tested hooklinev1.SendTestEventResponse
	if err := protojson.Unmarshal(out.Bytes(), &tested); err != nil || tested.GetResult().GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED {
		t.Fatalf("endpoint test printed %q (%v)", out.String(), err)
	}
	out.Reset()
	if err := run(t.Context(), []string{"recover", created.GetEndpoint().GetId(), "--since", "1h"}, &out, getenv); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "0/0") {
		t.Fatalf("recover with nothing failed printed %q, want 0/0", out.String())
	}

	out.Reset()
	if err := run(t.Context(), []string{"endpoint", "list"}, &out, getenv); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), created.GetEndpoint().GetId()) {
		t.Fatalf("endpoint list lacks %s: %s", created.GetEndpoint().GetId(), out.String())
	}
}

func TestClientCommandsExplainMissingSettings(t *testing.T) {
	noEnv := func(string) string { return "" }
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"publish", "--type", "a.b", "--data", "{}"}, "HOOKLINE_API_KEY"},
		{[]string{"publish"}, "--type and --data are required"},
		{[]string{"endpoint", "get"}, "HOOKLINE_API_KEY"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"results"}, "results tail"},
		{[]string{"resend"}, "usage: hookline resend DELIVERY_ID"},
		{[]string{"resend", "dlv_x"}, "HOOKLINE_API_KEY"},
		{[]string{"deliveries", "list"}, "HOOKLINE_API_KEY"},
		{[]string{"deliveries", "list", "extra"}, "usage: hookline deliveries"},
		{[]string{"deliveries", "list", "--since", "yesterday"}, `--since "yesterday"`},
		{[]string{"deliveries", "list", "--since", "1h", "--until", "2h"}, "is not after --since"},
		{[]string{"deliveries", "list", "--limit", "-1"}, "--limit -1"},
		{[]string{"events"}, "usage: hookline events"},
		{[]string{"events", "get"}, "usage: hookline events get EVENT_ID"},
		{[]string{"events", "list", "--until", "soon"}, `--until "soon"`},
		{[]string{"events", "frob"}, `unknown events command "frob"`},
		{[]string{"deliveries", "list", "--event", "evt_x", "--state", "lost"}, `--state "lost"`},
		{[]string{"deliveries", "get", "dlv_x"}, "HOOKLINE_API_KEY"},
		{[]string{"recover", "ep_x"}, "usage: hookline recover"},
		{[]string{"apikey", "new"}, "--tenant is required"},
		{[]string{"apikey", "new", "--tenant", "a:b"}, "no ':'"},
		{[]string{"recover", "ep_x", "--since", "yesterday"}, `--since "yesterday"`},
		{[]string{"lanes"}, "usage: hookline lanes"},
		{[]string{"lanes", "blocked"}, "--endpoint is required"},
		{[]string{"lanes", "skip", "--endpoint", "ep_x"}, "--delivery is required"},
		{[]string{"lanes", "unblock", "--endpoint", "ep_x"}, `unknown lanes command "unblock"`},
		{[]string{"endpoint", "create", "--url", "http://x", "--on-head-failure", "stop", "--api-key", "k"}, `--on-head-failure "stop"`},
		{[]string{"publish", "--type", "a.b", "--data", "{}", "--metadata", "region"}, `--metadata "region": give key=value`},
	}
	for _, tt := range tests {
		err := run(t.Context(), tt.args, io.Discard, noEnv)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("hookline %v: got %v, want an error mentioning %q", tt.args, err, tt.want)
		}
	}
}

func waitServing(t *testing.T, addr string, creds credentials.TransportCredentials) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	w, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	for {
		r, err := w.Recv()
		if err != nil {
			t.Fatalf("ingest never became SERVING: %v", err)
		}
		if r.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return
		}
	}
}

func TestAPIKeyNewPrintsAKeyItsEntryAdmits(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), []string{"apikey", "new", "--tenant", "acme", "--scope", "publish"}, &out, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	var key, entry string
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "key:" {
			key = f[1]
		} else if len(f) == 2 && f[0] == "entry:" {
			entry = f[1]
		}
	}
	r, err := apikey.Parse([]string{entry}, apikey.MinBits)
	if err != nil {
		t.Fatalf("printed entry %q does not parse: %v", entry, err)
	}
	if p, ok := r.Resolve(key); !ok || p != (apikey.Principal{Tenant: "acme", Scope: apikey.ScopePublish}) {
		t.Fatalf("printed key does not resolve to acme/publish through the printed entry: %+v, %v", p, ok)
	}
	if s := apikey.Measure(key); s.Capacity < 256 || s.Pattern < apikey.MinBits {
		t.Fatalf("a new key is weak: %+v", s)
	}
	if err := run(t.Context(), []string{"apikey", "new", "--tenant", "acme", "--scope", "write"}, &out, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "publish, read or admin") {
		t.Fatalf("an unknown scope: %v", err)
	}
}
