package ingest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// gatewayURL serves s's HTTP gateway (no Kafka) and returns its base URL.
func gatewayURL(t *testing.T, s *Service) string {
	t.Helper()
	srv, _ := s.grpcServer()
	gw, err := newGateway(t.Context(), srv, s.cfg.MaxPayloadBytes, s.cfg.HTTPCallTimeout)
	if err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(gw)
	t.Cleanup(func() { web.Close(); srv.Stop(); gw.Close() })
	return web.URL
}

// TestAPayloadSentAsAPlainJSONStringSaysHowPayloadsAreRead: over HTTP,
// {"payload":"hello"} is refused with an error that says a JSON string
// is read as base64 (the protobuf JSON form of bytes) and that a JSON
// object is taken as is, not a bare protobuf decoding error.
func TestAPayloadSentAsAPlainJSONStringSaysHowPayloadsAreRead(t *testing.T) {
	base := gatewayURL(t, newURLTestService(t, func(*Config) {}))
	for _, body := range []string{`{"event_type":"a.b","payload":"hello world"}`, `{"event_type":"a.b","payload":"{\"a\":1}"}`} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/v1/events", strings.NewReader(body))
		req.Header.Set("authorization", "Bearer "+acmeKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var st struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(got, &st)
		if resp.StatusCode != http.StatusBadRequest || st.Code != 3 {
			t.Fatalf("%s: %d %s, want 400 INVALID_ARGUMENT", body, resp.StatusCode, got)
		}
		for _, want := range []string{"base64", "JSON object"} {
			if !strings.Contains(st.Message, want) {
				t.Errorf("%s: message %q does not mention %s", body, st.Message, want)
			}
		}
	}
}
