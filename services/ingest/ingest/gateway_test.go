package ingest

import (
	"encoding/base64"
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
