package ingest

import (
	"strings"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/transform"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func tryService(t *testing.T) *Service {
	t.Helper()
	s := filterService(t)
	s.content.transforms = transform.NewCache(8)
	s.now = time.Now
	s.cfg.MaxPayloadBytes = 1 << 20
	s.content.maxPayloadBytes = 1 << 20
	return s
}

// TestTryTransformationRunsWhateverTheFilterDecided: a tried
// transformation reshapes the sample (payload, event type, method,
// header) with the sample url, cancels, or fails with the run's error,
// each with a duration, and runs even when the filter does not match.
func TestTryTransformationRunsWhateverTheFilterDecided(t *testing.T) {
	s := tryService(t)
	tests := []struct {
		name       string
		give       string
		wantPay    string
		wantCancel bool
		wantErr    string
	}{
		{"reshape", `function handler(w) { w.payload = {text: "paid " + w.payload.amount}; w.eventType = "slack.msg"; w.method = "PUT"; w.headers["X-Team"] = "billing"; return w }`, `{"text":"paid 15"}`, false, ""},
		{"cancel", `function handler(w) { return {cancel: true} }`, "", true, ""},
		{"throw", `function handler(w) { throw new Error("no customer") }`, "", false, "no customer"},
		{"invalid output", `function handler(w) { w.method = "DELETE"; return w }`, "", false, `method "DELETE"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := s.endpointAPI.TestFilterAndTransformation(t.Context(), &hooklinev1.TestFilterAndTransformationRequest{
				Filter: `payload.amount > 1000`, Transformation: tt.give, EventType: "invoice.paid", Payload: []byte(`{"amount": 15}`),
			})
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetFilter().GetMatched() {
				t.Fatalf("filter matched %v", resp.GetFilter())
			}
			tr := resp.GetTransformation()
			if tr == nil || tr.GetDuration() == nil || tr.GetCancelled() != tt.wantCancel || !strings.Contains(tr.GetError(), tt.wantErr) || (tt.wantErr == "") != (tr.GetError() == "") {
				t.Fatalf("got %v; want cancelled %v, error %q, a duration", tr, tt.wantCancel, tt.wantErr)
			}
			w := tr.GetWebhook()
			if tt.wantPay == "" {
				if w != nil {
					t.Fatalf("a webhook %v from a run that did not return one", w)
				}
				return
			}
			if string(w.GetPayload()) != tt.wantPay || w.GetEventType() != "slack.msg" || w.GetMethod() != "PUT" || w.GetUrl() != sampleURL || w.GetHeaders()["X-Team"] != "billing" {
				t.Fatalf("webhook %v; want payload %s, slack.msg, PUT, %s, X-Team", w, tt.wantPay, sampleURL)
			}
		})
	}
}

// TestTryTransformationAloneOrNothing: a transformation can be tried
// without a filter; a bad script is INVALID_ARGUMENT with goja's
// message; neither filter nor transformation nor endpoint is
// INVALID_ARGUMENT.
func TestTryTransformationAloneOrNothing(t *testing.T) {
	s := tryService(t)
	resp, err := s.endpointAPI.TestFilterAndTransformation(t.Context(), &hooklinev1.TestFilterAndTransformationRequest{
		Transformation: `function handler(w) { return w }`, EventType: "invoice.paid", Payload: []byte(`not json`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetFilter() != nil || string(resp.GetTransformation().GetWebhook().GetPayload()) != "not json" {
		t.Fatalf("got %v; want no filter result and the payload unchanged", resp)
	}
	_, err = s.endpointAPI.TestFilterAndTransformation(t.Context(), &hooklinev1.TestFilterAndTransformationRequest{
		Transformation: `function handler(w) {`, EventType: "invoice.paid",
	})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "transformation does not compile") || !strings.Contains(status.Convert(err).Message(), "transformation.js:") {
		t.Fatalf("a bad script: %v; want INVALID_ARGUMENT with goja's message and position", err)
	}
	_, err = s.endpointAPI.TestFilterAndTransformation(t.Context(), &hooklinev1.TestFilterAndTransformationRequest{EventType: "invoice.paid"})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("nothing to try: %v; want INVALID_ARGUMENT", err)
	}
	if s.content.transforms.Len() != 0 {
		t.Fatalf("tried scripts went into the fan-out's cache (%d)", s.content.transforms.Len())
	}
}
