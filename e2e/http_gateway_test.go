package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hookline/hookline/platform/tlsconf"
	"github.com/hookline/hookline/platform/tlsconf/tlstest"
	"google.golang.org/grpc/credentials"
)

// httpCall is the curl equivalent: method path on ingest's port, with
// key as the bearer token (none when empty) and body as JSON.
func (st *stack) httpCall(method, path, key, body string) (int, map[string]any) {
	st.t.Helper()
	req, err := http.NewRequestWithContext(st.t.Context(), method, "http://"+st.addr+path, strings.NewReader(body))
	if err != nil {
		st.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		st.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		st.t.Fatal(err)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		st.t.Fatalf("%s %s: content-type %q, body %s", method, path, ct, raw)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		st.t.Fatalf("%s %s: body is not a JSON object: %s", method, path, raw)
	}
	return res.StatusCode, out
}

func TestHTTPJSONPublishesOnTheGRPCPortAndReadsTheDelivery(t *testing.T) {
	st := startStack(t)
	rx := newReceiver(t, http.StatusOK)
	ep := st.createEndpoint(rx.URL + "/hooks")

	// The payload as protojson has it (base64), then as the JSON itself.
	inline := `{"invoice":"in_2", "amount":42}`
	bodies := []string{
		`{"event_type":"invoice.paid","payload":"` + base64.StdEncoding.EncodeToString([]byte(`{"invoice":"in_1"}`)) + `"}`,
		`{"event_type":"invoice.paid","payload":` + inline + `,"idempotency_key":"order-2"}`,
	}
	var deliveryIDs []string
	for _, body := range bodies {
		code, pub := st.httpCall("POST", "/v1/events", st.apiKey, body)
		if code != http.StatusOK {
			t.Fatalf("POST /v1/events = %d %v", code, pub)
		}
		dl, _ := pub["deliveries"].([]any)
		if len(dl) != 1 || !strings.HasPrefix(pub["event_id"].(string), "evt_") {
			t.Fatalf("publish answered %v, want an event id and one delivery", pub)
		}
		d := dl[0].(map[string]any)
		if d["endpoint_id"] != ep.GetEndpoint().GetId() {
			t.Fatalf("delivery to %v, want %s", d["endpoint_id"], ep.GetEndpoint().GetId())
		}
		deliveryIDs = append(deliveryIDs, d["delivery_id"].(string))
	}
	st.deliveredAll(2)
	got := map[string]bool{}
	for _, p := range rx.got() {
		got[string(p.body)] = true
	}
	if !got[`{"invoice":"in_1"}`] || !got[inline] {
		t.Fatalf("receiver got %v, want both payloads byte for byte", got)
	}
	for _, id := range deliveryIDs {
		code, dlv := st.httpCall("GET", "/v1/deliveries/"+id, st.apiKey, "")
		if code != http.StatusOK {
			t.Fatalf("GET delivery = %d %v", code, dlv)
		}
		if s := dlv["delivery"].(map[string]any)["state"]; s != "DELIVERY_STATE_DELIVERED" {
			t.Fatalf("delivery %s state %v, want DELIVERY_STATE_DELIVERED", id, s)
		}
	}

	// The same port still speaks gRPC.
	st.publish("invoice.paid", `{"via":"grpc"}`)
	st.deliveredAll(3)
}

func TestHTTPJSONErrorsCarryTheStatusOfTheirGRPCCode(t *testing.T) {
	st := startStack(t)
	tests := []struct {
		name, method, path, key, body string
		wantStatus                    int
		wantCode                      float64 // google.rpc.Code in the body
		wantMessage                   string
	}{
		{"no API key", "POST", "/v1/events", "", `{"event_type":"a.b","payload":{}}`, http.StatusUnauthorized, 16, ""},
		{"wrong API key", "POST", "/v1/events", "nope", `{"event_type":"a.b","payload":{}}`, http.StatusUnauthorized, 16, ""},
		{"invalid event type", "POST", "/v1/events", st.apiKey, `{"event_type":"","payload":{}}`, http.StatusBadRequest, 3, "event_type"},
		{"payload not JSON", "POST", "/v1/events", st.apiKey, `{"event_type":"a.b","payload":"` + base64.StdEncoding.EncodeToString([]byte("not json")) + `"}`, http.StatusBadRequest, 3, "payload"},
		{"misspelt field", "POST", "/v1/events", st.apiKey, `{"event_type":"a.b","paylod":{}}`, http.StatusBadRequest, 3, "paylod"},
		{"unknown delivery", "GET", "/v1/deliveries/dlv_nope", st.apiKey, "", http.StatusNotFound, 5, ""},
		// Over --max-payload-bytes is 400 naming it, whatever the size:
		// read by the handler (3 MiB), or refused at the door (6 MiB).
		{"payload over the limit", "POST", "/v1/events", st.apiKey, `{"event_type":"a.b","payload":"` + strings.Repeat("A", 4<<20) + `"}`, http.StatusBadRequest, 3, "--max-payload-bytes"},
		{"payload far over the limit", "POST", "/v1/events", st.apiKey, `{"event_type":"a.b","payload":"` + strings.Repeat("A", 8<<20) + `"}`, http.StatusBadRequest, 3, "--max-payload-bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := st.httpCall(tt.method, tt.path, tt.key, tt.body)
			if code != tt.wantStatus || body["code"] != tt.wantCode {
				t.Fatalf("%s %s = HTTP %d %v, want HTTP %d with code %v", tt.method, tt.path, code, body, tt.wantStatus, tt.wantCode)
			}
			if msg, _ := body["message"].(string); !strings.Contains(msg, tt.wantMessage) {
				t.Fatalf("message %q does not name %q", msg, tt.wantMessage)
			}
		})
	}
}

func TestHTTPHealthz(t *testing.T) {
	st := startStack(t)
	res, err := http.Get("http://" + st.addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || !bytes.Contains(b, []byte("SERVING")) {
		t.Fatalf("GET /healthz = %d %s", res.StatusCode, b)
	}
}

// TestHTTPJSONAndGRPCShareTheTLSPort: behind ingest's TLS, a gRPC client
// (ALPN h2 only) reaches gRPC and an HTTP client that offers both h2 and
// http/1.1 (curl, browsers) is given http/1.1 and reaches the gateway.
func TestHTTPJSONAndGRPCShareTheTLSPort(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "hookline test CA")
	srv := ca.WriteFiles(dir, "ingest", "127.0.0.1")
	cfg, err := tlsconf.Client(srv.CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	st := startStack(t, func(c *stackConfig) {
		c.ingest.GRPCTLSCert, c.ingest.GRPCTLSKey = srv.Cert, srv.Key
		c.clientCreds = credentials.NewTLS(cfg.Clone())
	})
	rx := newReceiver(t, http.StatusOK)
	st.createEndpoint(rx.URL) // over gRPC

	httpsCfg := cfg.Clone()
	httpsCfg.NextProtos = []string{"h2", "http/1.1"}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: httpsCfg, ForceAttemptHTTP2: true}}
	req, err := http.NewRequestWithContext(t.Context(), "POST", "https://"+st.addr+"/v1/events", strings.NewReader(`{"event_type":"invoice.paid","payload":{"over":"https"}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+st.apiKey)
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Proto != "HTTP/1.1" || !bytes.Contains(body, []byte(`"event_id"`)) {
		t.Fatalf("POST https://…/v1/events = %s %d %s", res.Proto, res.StatusCode, body)
	}
	st.deliveredAll(1)
	if got := string(rx.got()[0].body); got != `{"over":"https"}` {
		t.Fatalf("receiver got %s", got)
	}
}
