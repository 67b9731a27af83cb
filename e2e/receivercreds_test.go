package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/kafkatest"
	"github.com/hookline/hookline/sdk/sign"
	"github.com/hookline/hookline/services/dispatcher/dispatcher"
	"github.com/hookline/hookline/services/ingest/ingest"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

// TestReceiverCredentials runs the tests of what endpoints send their
// receivers besides the signature (custom headers, receiver auth) on one
// stack; each has its own endpoints and event types.
func TestReceiverCredentials(t *testing.T) {
	// Every service's log lines, at debug level, kept for the last check.
	logs := &lockedBuffer{}
	logger := func(service string) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.MultiWriter(t.Output(), logs), &slog.HandlerOptions{Level: slog.LevelDebug})).With("service", service)
	}
	st := startStack(t, func(c *stackConfig) {
		c.ingestOpts = append(c.ingestOpts, ingest.WithLogger(logger("ingest")))
		c.dispatcherOpts = append(c.dispatcherOpts, dispatcher.WithLogger(logger("dispatcher")))
	})
	t.Run("CustomHeadersReachTheReceiverAndSecretValuesAreNeverAnswered", func(t *testing.T) { customHeadersReachTheReceiver(t, st) })
	t.Run("ReservedHeaderNamesAreRefusedSayingWhatToFix", func(t *testing.T) { reservedHeadersAreRefused(t, st) })
	t.Run("BasicAndBearerReachTheReceiverAndAuthorizationCannotBeOverridden", func(t *testing.T) { basicAndBearerReachTheReceiver(t, st) })
	t.Run("OAuth2OneTokenSharedBy100DeliveriesAndA401RefreshesWithinTheAttempt", func(t *testing.T) { oauth2SharedTokenAndRefresh(t, st) })
	t.Run("OAuth2TokenEndpointDownIsRetriedOnTheLadderWithItsCause", func(t *testing.T) { oauth2TokenEndpointDown(t, st) })
	t.Run("HTTPJSONSetsHeadersAndAuthAndAnswersNoSecret", func(t *testing.T) { httpJSONSetsHeadersAndAuth(t, st) })
	// Last: it searches what the others wrote.
	t.Run("NoTopicHoldsACredential", func(t *testing.T) { noTopicHoldsACredential(t, st, credentialNeedles, 200) })
	t.Run("NoLogLineHoldsACredential", func(t *testing.T) {
		out := logs.String()
		if !strings.Contains(out, "oauth2 token endpoint answered HTTP 503") {
			t.Fatal("the logs lack the token endpoint's failure: they are not the services' logs")
		}
		for _, n := range credentialNeedles {
			if strings.Contains(out, n) {
				t.Fatalf("a log line holds credential %q", n)
			}
		}
	})
}

// credentialNeedles are every credential value the subtests use: none
// may appear in any topic.
var credentialNeedles = []string{httpHeaderSecret, httpClientSecret, hdrSecret, hdrSecretRotated, basicPassword, bearerToken, oauth2ClientSecret, "tok-1", "tok-2", "tok-3"}

const (
	httpHeaderSecret   = "http-hdr-2b7e51"
	httpClientSecret   = "http-cs-90aa4c"
	hdrSecret          = "hdr-secret-7f3a9c"
	hdrSecretRotated   = "hdr-secret-rotated-91be"
	basicPassword      = "basic-pw-0c4e2a"
	bearerToken        = "bearer-tok-6d2f81"
	oauth2ClientSecret = "oauth2-cs-e4b7a3"
)

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
	created := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, EventTypes: []string{"hdr.test"}, Headers: []*hooklinev1.EndpointHeader{
		{Name: "X-Tenant-Route", Value: "eu-1"},
		{Name: "X-Api-Key", Value: hdrSecret, Secret: true},
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
	if p.header.Get("X-Tenant-Route") != "eu-1" || p.header.Get("X-Api-Key") != hdrSecret {
		t.Fatalf("receiver got X-Tenant-Route %q, X-Api-Key %q", p.header.Get("X-Tenant-Route"), p.header.Get("X-Api-Key"))
	}
	if p.header.Get(sign.HeaderID) == "" || p.header.Get(sign.HeaderSignature) == "" || p.header.Get("Content-Type") != "application/json" {
		t.Fatalf("Hookline's own headers missing: %v", p.header)
	}

	// A new secret value replaces the old.
	ep := upd.GetEndpoint()
	ep.Headers = []*hooklinev1.EndpointHeader{{Name: "X-Api-Key", Value: hdrSecretRotated, Secret: true}}
	if _, err := st.endpoints().UpdateEndpoint(st.ctx(), &hooklinev1.UpdateEndpointRequest{Endpoint: ep, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"headers"}}}); err != nil {
		t.Fatal(err)
	}
	st.publish("hdr.test", `{"n":2}`)
	st.deliveredOf(id, 2)
	p = rx.got()[1]
	if p.header.Get("X-Api-Key") != hdrSecretRotated || p.header.Get("X-Tenant-Route") != "" {
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

// basicAndBearerReachTheReceiver: a basic and a bearer endpoint's
// attempts carry their Authorization header, answers never their
// secrets; a custom authorization header beside auth is refused, and an
// update that sends the auth back as read keeps its secret.
func basicAndBearerReachTheReceiver(t *testing.T, st *stack) {
	rx := newReceiver(t, http.StatusOK)
	basic := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, EventTypes: []string{"auth.basic"}, Auth: &hooklinev1.ReceiverAuth{
		Method: &hooklinev1.ReceiverAuth_Basic_{Basic: &hooklinev1.ReceiverAuth_Basic{Username: "hookline", Password: basicPassword}}}})
	bearer := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, EventTypes: []string{"auth.bearer"}, Auth: &hooklinev1.ReceiverAuth{
		Method: &hooklinev1.ReceiverAuth_Bearer_{Bearer: &hooklinev1.ReceiverAuth_Bearer{Token: bearerToken}}}})
	if b := basic.GetEndpoint().GetAuth().GetBasic(); b.GetPassword() != "" || !b.GetPasswordSet() || b.GetUsername() != "hookline" {
		t.Fatalf("basic auth answered as %v", b)
	}
	got, err := st.endpoints().GetEndpoint(st.ctx(), &hooklinev1.GetEndpointRequest{Id: bearer.GetEndpoint().GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if b := got.GetEndpoint().GetAuth().GetBearer(); b.GetToken() != "" || !b.GetTokenSet() {
		t.Fatalf("bearer auth answered as %v", b)
	}
	// Sent back as read (token empty): the token is kept.
	if _, err := st.endpoints().UpdateEndpoint(st.ctx(), &hooklinev1.UpdateEndpointRequest{Endpoint: got.GetEndpoint(), UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"auth", "headers"}}}); err != nil {
		t.Fatal(err)
	}
	st.publish("auth.basic", `{"n":1}`)
	st.deliveredOf(basic.GetEndpoint().GetId(), 1)
	st.publish("auth.bearer", `{"n":1}`)
	st.deliveredOf(bearer.GetEndpoint().GetId(), 1)
	posts := rx.got()
	if a := posts[0].header.Get("Authorization"); a != "Basic "+base64.StdEncoding.EncodeToString([]byte("hookline:"+basicPassword)) {
		t.Fatalf("basic endpoint sent Authorization %q", a)
	}
	if a := posts[1].header.Get("Authorization"); a != "Bearer "+bearerToken {
		t.Fatalf("bearer endpoint sent Authorization %q", a)
	}
	// Authorization is auth's: a custom one beside it is refused, on
	// create and on update.
	_, err = st.endpoints().CreateEndpoint(st.ctx(), &hooklinev1.CreateEndpointRequest{Url: rx.URL, Auth: &hooklinev1.ReceiverAuth{
		Method: &hooklinev1.ReceiverAuth_Bearer_{Bearer: &hooklinev1.ReceiverAuth_Bearer{Token: bearerToken}}},
		Headers: []*hooklinev1.EndpointHeader{{Name: "Authorization", Value: "Bearer other"}}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "reserved while the endpoint has auth") {
		t.Fatalf("authorization header beside auth: %v; want INVALID_ARGUMENT saying it is reserved while auth is set", err)
	}
	ep := got.GetEndpoint()
	ep.Etag = "" // updated since
	ep.Headers = []*hooklinev1.EndpointHeader{{Name: "authorization", Value: "Bearer other"}}
	_, err = st.endpoints().UpdateEndpoint(st.ctx(), &hooklinev1.UpdateEndpointRequest{Endpoint: ep, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"headers"}}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "reserved while the endpoint has auth") {
		t.Fatalf("update adding an authorization header beside auth: %v", err)
	}
	// A method without its secret is refused.
	_, err = st.endpoints().CreateEndpoint(st.ctx(), &hooklinev1.CreateEndpointRequest{Url: rx.URL, Auth: &hooklinev1.ReceiverAuth{
		Method: &hooklinev1.ReceiverAuth_Basic_{Basic: &hooklinev1.ReceiverAuth_Basic{Username: "u"}}}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "auth.basic.password: is required") {
		t.Fatalf("basic without a password: %v", err)
	}
}

// countingTokenEndpoint is an OAuth2 token endpoint that counts its
// calls and issues "tok-<n>" for the n-th, valid for an hour; the first
// failFirst calls are answered 503.
type countingTokenEndpoint struct {
	*httptest.Server
	calls     atomic.Int32
	failFirst int32
}

func newCountingTokenEndpoint(t *testing.T, failFirst int32) *countingTokenEndpoint {
	te := &countingTokenEndpoint{failFirst: failFirst}
	te.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := te.calls.Add(1)
		if id, secret, ok := r.BasicAuth(); !ok || id != "hookline" || secret != oauth2ClientSecret {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if n <= te.failFirst {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"access_token":"tok-%d","token_type":"Bearer","expires_in":3600}`, n-te.failFirst)
	}))
	t.Cleanup(te.Close)
	return te
}

func (te *countingTokenEndpoint) auth() *hooklinev1.ReceiverAuth {
	return &hooklinev1.ReceiverAuth{Method: &hooklinev1.ReceiverAuth_Oauth2ClientCredentials{Oauth2ClientCredentials: &hooklinev1.ReceiverAuth_OAuth2ClientCredentials{
		TokenUrl: te.URL + "/oauth/token", ClientId: "hookline", ClientSecret: oauth2ClientSecret, Scopes: []string{"webhooks"}}}}
}

// bearerReceiver answers 204 to "Bearer <valid>" and 401 otherwise.
type bearerReceiver struct {
	*httptest.Server
	valid atomic.Value
	hits  atomic.Int32
}

func newBearerReceiver(t *testing.T, valid string) *bearerReceiver {
	rx := &bearerReceiver{}
	rx.valid.Store(valid)
	rx.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rx.hits.Add(1)
		if r.Header.Get("Authorization") != "Bearer "+rx.valid.Load().(string) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rx.Close)
	return rx
}

// oauth2SharedTokenAndRefresh: 100 deliveries to an OAuth2 endpoint are
// delivered at attempt 1 with one token; once the receiver revokes it,
// the next delivery's attempt gets one fresh token and is delivered at
// attempt 1.
func oauth2SharedTokenAndRefresh(t *testing.T, st *stack) {
	te := newCountingTokenEndpoint(t, 0)
	rx := newBearerReceiver(t, "tok-1")
	ep := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, EventTypes: []string{"auth.oauth2"}, MaxInFlight: 50, Auth: te.auth()})
	if o := ep.GetEndpoint().GetAuth().GetOauth2ClientCredentials(); o.GetClientSecret() != "" || !o.GetClientSecretSet() || o.GetTokenUrl() != te.URL+"/oauth/token" {
		t.Fatalf("oauth2 auth answered as %v", o)
	}
	id := ep.GetEndpoint().GetId()
	for i := range 100 {
		st.publish("auth.oauth2", fmt.Sprintf(`{"n":%d}`, i))
	}
	for _, r := range st.deliveredOf(id, 100) {
		if r.GetAttempt() != 1 {
			t.Fatalf("delivered at attempt %d: %v", r.GetAttempt(), r)
		}
	}
	if n := te.calls.Load(); n != 1 {
		t.Fatalf("100 deliveries took %d token requests, want 1", n)
	}
	rx.valid.Store("tok-2") // tok-1 revoked
	st.publish("auth.oauth2", `{"n":100}`)
	res := st.deliveredOf(id, 101)
	if last := res[100]; last.GetAttempt() != 1 {
		t.Fatalf("after revocation: %v; want delivered at attempt 1 (the refresh is within the attempt)", last)
	}
	if te.calls.Load() != 2 || rx.hits.Load() != 102 {
		t.Fatalf("%d token requests, %d receiver requests; want 2 and 102", te.calls.Load(), rx.hits.Load())
	}
}

// oauth2TokenEndpointDown: a token endpoint answering 503 fails the
// attempt as transient with its cause on the results topic; the retry on
// the ladder gets a token and is delivered.
func oauth2TokenEndpointDown(t *testing.T, st *stack) {
	te := newCountingTokenEndpoint(t, 1)
	rx := newBearerReceiver(t, "tok-1")
	ep := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, EventTypes: []string{"auth.oauth2down"}, Auth: te.auth(),
		RetryPolicy: ladderPolicy(3, 100*time.Millisecond)})
	st.publish("auth.oauth2down", `{"n":1}`)
	res := st.resultsOf(ep.GetEndpoint().GetId(), 2)
	first, second := res[0], res[1]
	if first.GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED || first.GetClass() != hooklinev1.OutcomeClass_OUTCOME_CLASS_TRANSIENT ||
		!strings.Contains(first.GetError(), "oauth2 token endpoint answered HTTP 503") {
		t.Fatalf("first attempt: %v; want RETRY_SCHEDULED, transient, the token endpoint's 503 as its error", first)
	}
	if second.GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED || second.GetAttempt() != 2 {
		t.Fatalf("second attempt: %v; want delivered at attempt 2", second)
	}
	if rx.hits.Load() != 1 {
		t.Fatalf("receiver got %d requests, want 1 (none without a token)", rx.hits.Load())
	}
}

// noTopicHoldsACredential reads every topic of the stack raw: no record
// (value, key or header) holds any credential value.
// At least minRecords are read: the test wrote them.
func noTopicHoldsACredential(t *testing.T, st *stack, needles []string, minRecords int) {
	topics, err := st.admin.ListTopics(st.ctx())
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for _, name := range topics.Names() {
		if !strings.HasPrefix(name, st.kafka.TopicPrefix) {
			continue
		}
		recs, err := hkafka.ReadAll(st.ctx(), st.kafka, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			read++
			hay := [][]byte{r.Key, r.Value}
			for _, h := range r.Headers {
				hay = append(hay, h.Value)
			}
			for _, n := range needles {
				for _, b := range hay {
					if bytes.Contains(b, []byte(n)) {
						t.Fatalf("record %s@%d of %s holds credential %q", r.Key, r.Offset, name, n)
					}
				}
			}
		}
	}
	if read < minRecords {
		t.Fatalf("read %d records in all topics, want at least %d", read, minRecords)
	}
}

// httpJSONSetsHeadersAndAuth: over HTTP/JSON (the gateway, snake_case)
// an endpoint is created with a secret header and OAuth2 auth; the
// answer says both are set and holds neither secret; a reserved header
// is HTTP 400 with the gRPC code and the message naming the field.
func httpJSONSetsHeadersAndAuth(t *testing.T, st *stack) {
	body := `{"url":"http://127.0.0.1:9/hooks","event_types":["none.ever"],
	  "headers":[{"name":"X-Api-Key","value":"` + httpHeaderSecret + `","secret":true}],
	  "auth":{"oauth2_client_credentials":{"token_url":"http://127.0.0.1:9/token","client_id":"c","client_secret":"` + httpClientSecret + `","scopes":["a","b"]}}}`
	code, out := st.httpCall("POST", "/v1/endpoints", st.apiKey, body)
	if code != http.StatusOK {
		t.Fatalf("POST /v1/endpoints = %d %v", code, out)
	}
	raw, _ := json.Marshal(out)
	if bytes.Contains(raw, []byte(httpHeaderSecret)) || bytes.Contains(raw, []byte(httpClientSecret)) ||
		!bytes.Contains(raw, []byte(`"value_set":true`)) || !bytes.Contains(raw, []byte(`"client_secret_set":true`)) {
		t.Fatalf("POST /v1/endpoints answered %s: want the secrets set, not shown", raw)
	}
	code, out = st.httpCall("POST", "/v1/endpoints", st.apiKey, `{"url":"http://127.0.0.1:9/hooks","headers":[{"name":"Webhook-Signature","value":"v1,x"}]}`)
	if msg, _ := out["message"].(string); code != http.StatusBadRequest || out["code"] != float64(codes.InvalidArgument) || !strings.Contains(msg, "headers[0].name") {
		t.Fatalf("reserved header over HTTP = %d %v; want 400, code 3, naming headers[0].name", code, out)
	}
}
