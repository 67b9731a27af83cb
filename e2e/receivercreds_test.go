package e2e

import (
	"net/http"
	"strings"
	"testing"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/kafkatest"
	"github.com/hookline/hookline/sdk/sign"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

// TestReceiverCredentials runs the tests of what endpoints send their
// receivers besides the signature (custom headers, receiver auth) on one
// stack; each has its own endpoints and event types.
func TestReceiverCredentials(t *testing.T) {
	st := startStack(t)
	t.Run("CustomHeadersReachTheReceiverAndSecretValuesAreNeverAnswered", func(t *testing.T) { customHeadersReachTheReceiver(t, st) })
	t.Run("ReservedHeaderNamesAreRefusedSayingWhatToFix", func(t *testing.T) { reservedHeadersAreRefused(t, st) })
}

// resultsOf reads the first n results of endpoint id's deliveries.
func (st *stack) resultsOf(id string, n int) []*hooklinev1.AttemptResult {
	st.t.Helper()
	var out []*hooklinev1.AttemptResult
	st.readMatching(st.topics.Results, n, func(r *kgo.Record) bool {
		res := kafkatest.Decode(st.t, []*kgo.Record{r}, newResult)[0]
		if res.GetEndpointId() != id {
			return false
		}
		out = append(out, res)
		return true
	})
	return out
}

// deliveredOf waits for n results of endpoint id and fails unless each
// is DELIVERED.
func (st *stack) deliveredOf(id string, n int) []*hooklinev1.AttemptResult {
	st.t.Helper()
	res := st.resultsOf(id, n)
	for _, r := range res {
		if r.GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED {
			st.t.Fatalf("endpoint %s: result %v, want DELIVERED", id, r)
		}
	}
	return res
}

// customHeadersReachTheReceiver: a plain and a secret header reach the
// receiver on the attempt with Hookline's own headers intact; the
// secret's value is answered by no call (value_set instead), survives an
// update that sends the endpoint back as read, and is replaced by a new
// value.
func customHeadersReachTheReceiver(t *testing.T, st *stack) {
	rx := newReceiver(t, http.StatusOK)
	const secretValue = "hdr-secret-7f3a9c"
	created := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, EventTypes: []string{"hdr.test"}, Headers: []*hooklinev1.EndpointHeader{
		{Name: "X-Tenant-Route", Value: "eu-1"},
		{Name: "X-Api-Key", Value: secretValue, Secret: true},
	}})
	id := created.GetEndpoint().GetId()
	checkAnswered := func(ep *hooklinev1.Endpoint) {
		t.Helper()
		hs := ep.GetHeaders()
		if len(hs) != 2 || hs[0].GetValue() != "eu-1" || hs[1].GetName() != "X-Api-Key" || hs[1].GetValue() != "" || !hs[1].GetValueSet() || !hs[1].GetSecret() {
			t.Fatalf("answered headers %v: want X-Tenant-Route=eu-1 and X-Api-Key secret, set, without its value", hs)
		}
	}
	checkAnswered(created.GetEndpoint())
	got, err := st.endpoints().GetEndpoint(st.ctx(), &hooklinev1.GetEndpointRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	checkAnswered(got.GetEndpoint())
	// The endpoint sent back as read keeps the secret's value.
	upd, err := st.endpoints().UpdateEndpoint(st.ctx(), &hooklinev1.UpdateEndpointRequest{Endpoint: got.GetEndpoint(), UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"headers"}}})
	if err != nil {
		t.Fatal(err)
	}
	checkAnswered(upd.GetEndpoint())

	st.publish("hdr.test", `{"n":1}`)
	st.deliveredOf(id, 1)
	p := rx.got()[0]
	if p.header.Get("X-Tenant-Route") != "eu-1" || p.header.Get("X-Api-Key") != secretValue {
		t.Fatalf("receiver got X-Tenant-Route %q, X-Api-Key %q", p.header.Get("X-Tenant-Route"), p.header.Get("X-Api-Key"))
	}
	if p.header.Get(sign.HeaderID) == "" || p.header.Get(sign.HeaderSignature) == "" || p.header.Get("Content-Type") != "application/json" {
		t.Fatalf("Hookline's own headers missing: %v", p.header)
	}

	// A new secret value replaces the old.
	ep := upd.GetEndpoint()
	ep.Headers = []*hooklinev1.EndpointHeader{{Name: "X-Api-Key", Value: "hdr-secret-rotated", Secret: true}}
	if _, err := st.endpoints().UpdateEndpoint(st.ctx(), &hooklinev1.UpdateEndpointRequest{Endpoint: ep, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"headers"}}}); err != nil {
		t.Fatal(err)
	}
	st.publish("hdr.test", `{"n":2}`)
	st.deliveredOf(id, 2)
	p = rx.got()[1]
	if p.header.Get("X-Api-Key") != "hdr-secret-rotated" || p.header.Get("X-Tenant-Route") != "" {
		t.Fatalf("after the update the receiver got X-Api-Key %q, X-Tenant-Route %q; want the new value and no removed header", p.header.Get("X-Api-Key"), p.header.Get("X-Tenant-Route"))
	}
}

// reservedHeadersAreRefused: every reserved name, a bad name, a
// duplicate, too many headers and too many bytes are INVALID_ARGUMENT
// naming the field and what to fix, on create and on update.
func reservedHeadersAreRefused(t *testing.T, st *stack) {
	many := make([]*hooklinev1.EndpointHeader, 21)
	for i := range many {
		many[i] = &hooklinev1.EndpointHeader{Name: "X-H" + strings.Repeat("i", i+1), Value: "v"}
	}
	tests := []struct {
		name    string
		give    []*hooklinev1.EndpointHeader
		wantMsg string
	}{
		{"webhook-signature", []*hooklinev1.EndpointHeader{{Name: "Webhook-Signature", Value: "v1,forged"}}, "headers[0].name: \"Webhook-Signature\" is reserved"},
		{"webhook-id", []*hooklinev1.EndpointHeader{{Name: "webhook-id", Value: "x"}}, "is reserved"},
		{"content-type", []*hooklinev1.EndpointHeader{{Name: "Content-Type", Value: "text/plain"}}, "is reserved"},
		{"content-length", []*hooklinev1.EndpointHeader{{Name: "Content-Length", Value: "1"}}, "is reserved"},
		{"host", []*hooklinev1.EndpointHeader{{Name: "Host", Value: "evil"}}, "is reserved"},
		{"traceparent", []*hooklinev1.EndpointHeader{{Name: "traceparent", Value: "x"}}, "is reserved"},
		{"tracestate", []*hooklinev1.EndpointHeader{{Name: "tracestate", Value: "x"}}, "is reserved"},
		{"baggage", []*hooklinev1.EndpointHeader{{Name: "Baggage", Value: "x"}}, "is reserved"},
		{"hop-by-hop", []*hooklinev1.EndpointHeader{{Name: "Transfer-Encoding", Value: "chunked"}}, "hop-by-hop"},
		{"connection", []*hooklinev1.EndpointHeader{{Name: "Connection", Value: "close"}}, "is reserved"},
		{"not a token", []*hooklinev1.EndpointHeader{{Name: "X Bad", Value: "v"}}, "is not an HTTP header name"},
		{"control character", []*hooklinev1.EndpointHeader{{Name: "X-A", Value: "a\r\nX-Injected: 1"}}, "headers[0].value: has a control character"},
		{"duplicate", []*hooklinev1.EndpointHeader{{Name: "X-A", Value: "1"}, {Name: "x-a", Value: "2"}}, "headers[1].name: \"x-a\" appears twice"},
		{"secret without value", []*hooklinev1.EndpointHeader{{Name: "X-A", Secret: true}}, "a secret header needs a value"},
		{"too many", many, "headers"},
		{"too many bytes", []*hooklinev1.EndpointHeader{{Name: "X-Big", Value: strings.Repeat("b", 8<<10)}}, "at most 8192 (8 KiB)"},
	}
	upd := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: "http://127.0.0.1:9/hooks", EventTypes: []string{"none.ever"}}).GetEndpoint()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := st.endpoints().CreateEndpoint(st.ctx(), &hooklinev1.CreateEndpointRequest{Url: "http://127.0.0.1:9/hooks", Headers: tt.give})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("create: %v; want INVALID_ARGUMENT saying %q", err, tt.wantMsg)
			}
			upd.Headers = tt.give
			_, err = st.endpoints().UpdateEndpoint(st.ctx(), &hooklinev1.UpdateEndpointRequest{Endpoint: upd, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"headers"}}})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("update: %v; want INVALID_ARGUMENT saying %q", err, tt.wantMsg)
			}
		})
	}
}
