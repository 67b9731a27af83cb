package ingest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"
)

func TestInlinePayloadTakesTheJSONDocumentOrItsBase64(t *testing.T) {
	b64 := func(s string) string { return `"` + base64.StdEncoding.EncodeToString([]byte(s)) + `"` }
	tests := []struct {
		name, give, want string
	}{
		{"object kept byte for byte", `{"event_type":"a.b","payload":{"x": 1}}`, `{"event_type":"a.b","payload":` + b64(`{"x": 1}`) + `}`},
		{"array", `{"payload":[1,2]}`, `{"payload":` + b64(`[1,2]`) + `}`},
		{"number", `{"payload":42}`, `{"payload":` + b64(`42`) + `}`},
		{"a string is already base64", `{"payload":"e30="}`, `{"payload":"e30="}`},
		{"null left to protojson", `{"payload":null}`, `{"payload":null}`},
		{"no payload", `{"event_type":"a.b"}`, `{"event_type":"a.b"}`},
		{"not an object left to protojson", `[1]`, `[1]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(inlinePayload([]byte(tt.give))); got != tt.want {
				t.Fatalf("inlinePayload(%s) = %s, want %s", tt.give, got, tt.want)
			}
		})
	}
}

// FuzzInlinePayload: whatever the body, inlinePayload does not panic, and
// when it rewrites a payload the base64 it writes decodes to the JSON
// value the caller sent, byte for byte.
func FuzzInlinePayload(f *testing.F) {
	for _, s := range []string{`{"payload":{"a":1}}`, `{"payload":"e30="}`, `{"payload":[1, 2 ]}`, `{"payload":null}`, `[]`, `{"payload":}`, `{"payload":1e999}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		out := inlinePayload(body)
		if bytes.Equal(out, body) {
			return
		}
		var in, got map[string]json.RawMessage
		if err := json.Unmarshal(body, &in); err != nil {
			t.Fatalf("rewrote a body that is not a JSON object: %q", body)
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("rewrote %q into invalid JSON %q", body, out)
		}
		var b64 string
		if err := json.Unmarshal(got["payload"], &b64); err != nil {
			t.Fatalf("payload not rewritten to a string: %q", got["payload"])
		}
		raw, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || !bytes.Equal(raw, bytes.TrimSpace(in["payload"])) {
			t.Fatalf("payload %q became %q", in["payload"], raw)
		}
	})
}
