package ingest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// bigJSON is a JSON document of exactly n bytes.
func bigJSON(n int) []byte {
	return []byte(`{"a":"` + strings.Repeat("x", n-8) + `"}`)
}

// TestOversizePayloadIsInvalidArgumentAtEveryDoor: a payload over
// --max-payload-bytes, just over it, a few times over or many times
// over, through gRPC or the HTTP gateway (as the document or as its
// base64, with or without a Content-Length), is INVALID_ARGUMENT (400)
// naming --max-payload-bytes and its value: never RESOURCE_EXHAUSTED
// (429, which clients retry) nor 413 naming another number.
func TestOversizePayloadIsInvalidArgumentAtEveryDoor(t *testing.T) {
	s := newURLTestService(t, func(*Config) {})
	limit := s.cfg.MaxPayloadBytes
	wantText := []string{"--max-payload-bytes", fmt.Sprint(limit)}
	addr := serve(t, s)
	srv, _ := s.grpcServer()
	gw, err := newGateway(t.Context(), srv, s.cfg.MaxPayloadBytes, s.cfg.HTTPCallTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop(); gw.Close() })
	web := httptest.NewServer(gw)
	defer web.Close()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	events := hooklinev1.NewEventServiceClient(conn)
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+acmeKey)

	for _, size := range []int{limit + 1, 2_100_000, 2_300_000, 5_000_000} {
		payload := bigJSON(size)
		t.Run(fmt.Sprintf("gRPC/%d", size), func(t *testing.T) {
			_, err := events.PublishEvent(ctx, &hooklinev1.PublishEventRequest{EventType: "a.b", Payload: payload})
			st := status.Convert(err)
			if st.Code() != codes.InvalidArgument {
				t.Fatalf("got %v, want InvalidArgument", err)
			}
			for _, w := range wantText {
				if !strings.Contains(st.Message(), w) {
					t.Errorf("message %q does not name %s", st.Message(), w)
				}
			}
		})
		bodies := map[string][]byte{}
		bodies["document"], _ = json.Marshal(map[string]any{"event_type": "a.b", "payload": json.RawMessage(payload)})
		bodies["base64"], _ = json.Marshal(map[string]any{"event_type": "a.b", "payload": base64.StdEncoding.EncodeToString(payload)})
		for form, body := range bodies {
			for _, chunked := range []bool{false, true} {
				t.Run(fmt.Sprintf("HTTP/%s/chunked=%v/%d", form, chunked, size), func(t *testing.T) {
					var r io.Reader = bytes.NewReader(body)
					if chunked {
						r = io.MultiReader(r) // no length known: sent chunked
					}
					req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, web.URL+"/v1/events", r)
					req.Header.Set("authorization", "Bearer "+acmeKey)
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					got, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusBadRequest {
						t.Fatalf("got %d %s, want 400", resp.StatusCode, got)
					}
					var st struct {
						Code    int    `json:"code"`
						Message string `json:"message"`
					}
					if err := json.Unmarshal(got, &st); err != nil || st.Code != int(codes.InvalidArgument) {
						t.Fatalf("body %s: want a google.rpc.Status with code 3 (%v)", got, err)
					}
					for _, w := range wantText {
						if !strings.Contains(st.Message, w) {
							t.Errorf("message %q does not name %s", st.Message, w)
						}
					}
				})
			}
		}
	}
}
