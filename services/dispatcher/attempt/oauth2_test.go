package attempt

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/classify"
	"github.com/hookline/hookline/platform/netguard"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

const clientSecret = "cs-5ad1f0e2"

// tokenEndpoint is an OAuth2 token endpoint on loopback that counts its
// calls and issues "tok-<n>" for the n-th, valid for an hour; status,
// when set, is answered instead.
type tokenEndpoint struct {
	*httptest.Server
	calls  atomic.Int32
	status atomic.Int32
}

func newTokenEndpoint(t testing.TB) *tokenEndpoint {
	te := &tokenEndpoint{}
	te.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := te.calls.Add(1)
		if id, secret, ok := r.BasicAuth(); !ok || id != "hookline" || secret != clientSecret || r.FormValue("grant_type") != "client_credentials" || r.FormValue("scope") != "webhooks:write" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"invalid_client","error_description":"bad client ` + clientSecret + `"}`))
			return
		}
		if code := te.status.Load(); code != 0 {
			w.WriteHeader(int(code))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": fmt.Sprint("tok-", n), "token_type": "bearer", "expires_in": 3600})
	}))
	t.Cleanup(te.Close)
	return te
}

func (te *tokenEndpoint) creds(t testing.TB, c *Client, secret string) *Credentials {
	t.Helper()
	cr, err := c.Credentials("", CredentialSpec{OAuth2: &OAuth2{TokenURL: te.URL + "/token", ClientID: "hookline", ClientSecret: secret, Scopes: []string{"webhooks:write"}}})
	if err != nil {
		t.Fatal(err)
	}
	return cr
}

// tokenReceiver answers 204 to "Bearer <valid>" and 401 to anything else.
type tokenReceiver struct {
	*httptest.Server
	valid atomic.Value
	hits  atomic.Int32
}

func newTokenReceiver(t *testing.T, valid string) *tokenReceiver {
	rx := &tokenReceiver{}
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

// clock is a settable clock for the Client.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

func TestOAuth2OneTokenPerExpiryWindowIsSharedByEveryAttempt(t *testing.T) {
	te := newTokenEndpoint(t)
	rx := newTokenReceiver(t, "tok-1")
	clk := &clock{t: time.Now()}
	c := New(mustPolicy(t), WithClock(clk.now))
	cr := te.creds(t, c, clientSecret)
	var wg sync.WaitGroup
	var delivered atomic.Int32
	for range 100 {
		wg.Go(func() {
			r := request(t, rx.URL)
			r.Credentials = cr
			if res, err := c.Do(t.Context(), r); err == nil && res.StatusCode == http.StatusNoContent {
				delivered.Add(1)
			}
		})
	}
	wg.Wait()
	if delivered.Load() != 100 || te.calls.Load() != 1 {
		t.Fatalf("%d of 100 delivered with %d token requests; want 100 with 1", delivered.Load(), te.calls.Load())
	}
	// Past the refresh point (30 s before the hour's end) a new token.
	rx.valid.Store("tok-2")
	clk.set(clk.now().Add(time.Hour - 29*time.Second))
	r := request(t, rx.URL)
	r.Credentials = cr
	if res, err := c.Do(t.Context(), r); err != nil || res.StatusCode != http.StatusNoContent || te.calls.Load() != 2 {
		t.Fatalf("after the expiry window: %d, %v with %d token requests; want 204 with 2", res.StatusCode, err, te.calls.Load())
	}
}

func TestOAuth2ReceiverRefusingACachedTokenGetsOneFreshTokenWithinTheAttempt(t *testing.T) {
	te := newTokenEndpoint(t)
	rx := newTokenReceiver(t, "tok-1")
	c := testClient(t, true)
	cr := te.creds(t, c, clientSecret)
	r := request(t, rx.URL)
	r.Credentials = cr
	if res, _ := c.Do(t.Context(), r); res.StatusCode != http.StatusNoContent {
		t.Fatalf("first attempt: %d", res.StatusCode)
	}
	rx.valid.Store("tok-2") // the receiver revoked tok-1
	res, err := c.Do(t.Context(), r)
	if err != nil || res.StatusCode != http.StatusNoContent || res.Class != hooklinev1.OutcomeClass_OUTCOME_CLASS_SUCCESS {
		t.Fatalf("attempt with a revoked cached token: %d %v, %v; want 204 success", res.StatusCode, res.Class, err)
	}
	if te.calls.Load() != 2 || rx.hits.Load() != 3 {
		t.Fatalf("%d token requests, %d receiver requests; want 2 and 3 (one refresh, one resend)", te.calls.Load(), rx.hits.Load())
	}
	// A token fetched for the attempt and refused: no second try.
	rx.valid.Store("never")
	res, _ = c.Do(t.Context(), r)
	if res.StatusCode != http.StatusUnauthorized || te.calls.Load() != 3 || rx.hits.Load() != 5 {
		t.Fatalf("refused cached token, refused fresh one: %d with %d token requests, %d receiver requests; want 401, 3, 5", res.StatusCode, te.calls.Load(), rx.hits.Load())
	}
	if res2, _ := c.Do(t.Context(), r); res2.StatusCode != http.StatusUnauthorized || te.calls.Load() != 4 || rx.hits.Load() != 7 {
		t.Fatalf("again: %d, %d token requests, %d receiver requests", res2.StatusCode, te.calls.Load(), rx.hits.Load())
	}
}

func TestOAuth2TokenEndpointFailingIsTransientAndRefusingIsPermanent(t *testing.T) {
	rx := newTokenReceiver(t, "tok-1")
	tests := []struct {
		name      string
		setup     func(te *tokenEndpoint)
		secret    string
		wantClass hooklinev1.OutcomeClass
		wantErr   string
	}{
		{"503", func(te *tokenEndpoint) { te.status.Store(http.StatusServiceUnavailable) }, clientSecret, hooklinev1.OutcomeClass_OUTCOME_CLASS_TRANSIENT, "answered HTTP 503"},
		{"429", func(te *tokenEndpoint) { te.status.Store(http.StatusTooManyRequests) }, clientSecret, hooklinev1.OutcomeClass_OUTCOME_CLASS_TRANSIENT, "answered HTTP 429"},
		{"down", func(te *tokenEndpoint) { te.Close() }, clientSecret, hooklinev1.OutcomeClass_OUTCOME_CLASS_TRANSIENT, "oauth2 token endpoint: dial tcp"},
		{"client refused", func(*tokenEndpoint) {}, "wrong-secret", hooklinev1.OutcomeClass_OUTCOME_CLASS_PERMANENT, "answered HTTP 401 (invalid_client)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			te := newTokenEndpoint(t)
			tt.setup(te)
			c := testClient(t, true)
			r := request(t, rx.URL)
			r.Credentials = te.creds(t, c, tt.secret)
			before := rx.hits.Load()
			res, err := c.Do(t.Context(), r)
			if err != nil || res.Class != tt.wantClass || res.Err == nil || !strings.Contains(res.Err.Error(), tt.wantErr) {
				t.Fatalf("got %v %v, %v; want %v with an error saying %q", res.Class, res.Err, err, tt.wantClass, tt.wantErr)
			}
			if strings.Contains(res.Err.Error(), clientSecret) || strings.Contains(res.Err.Error(), "wrong-secret") {
				t.Fatalf("the error %q holds the client secret", res.Err)
			}
			if tt.wantClass == hooklinev1.OutcomeClass_OUTCOME_CLASS_PERMANENT && !errors.Is(res.Err, classify.ErrCredentialsRefused) {
				t.Fatalf("a refusal does not wrap ErrCredentialsRefused: %v", res.Err)
			}
			if rx.hits.Load() != before {
				t.Fatal("the receiver was sent an attempt without a token")
			}
		})
	}
}

func TestOAuth2TokenURLPassesTheDestinationGuard(t *testing.T) {
	te := newTokenEndpoint(t)
	c := testClient(t, false) // loopback refused
	r := request(t, "https://example.invalid/hooks")
	r.Credentials = te.creds(t, c, clientSecret)
	res, err := c.Do(t.Context(), r)
	if err != nil || res.Class != hooklinev1.OutcomeClass_OUTCOME_CLASS_PERMANENT || !errors.Is(res.Err, classify.ErrRefusedDestination) || te.calls.Load() != 0 {
		t.Fatalf("token URL on loopback: %v %v, %v, %d token requests; want permanent, refused destination, none", res.Class, res.Err, err, te.calls.Load())
	}
}

func TestBasicAndBearerAuthAndCustomHeadersAreSentAndHooklinesOwnWin(t *testing.T) {
	var got http.Header
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Clone() }))
	defer rx.Close()
	c := testClient(t, true)
	tests := []struct {
		name     string
		spec     CredentialSpec
		wantAuth string
	}{
		{"basic", CredentialSpec{Basic: &BasicAuth{Username: "hook", Password: "pa:ss"}}, "Basic aG9vazpwYTpzcw=="},
		{"bearer", CredentialSpec{Bearer: "static-token"}, "Bearer static-token"},
		{"headers only", CredentialSpec{Header: http.Header{"X-Api-Key": {"k1"}}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.spec.Header = http.Header{"X-Api-Key": {"k1"}, "Content-Type": {"text/plain"}, "Webhook-Id": {"forged"}}
			cr, err := c.Credentials("", tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			r := request(t, rx.URL)
			r.Credentials = cr
			if res, err := c.Do(t.Context(), r); err != nil || res.StatusCode != http.StatusOK {
				t.Fatalf("%v %v", res, err)
			}
			if got.Get("Authorization") != tt.wantAuth || got.Get("X-Api-Key") != "k1" || got.Get("Content-Type") != "application/json" || got.Get("Webhook-Id") != "evt_1" {
				t.Fatalf("receiver got %v", got)
			}
		})
	}
}

// mustPolicy is a guard policy that allows loopback.
func mustPolicy(t testing.TB) *netguard.Policy {
	t.Helper()
	g, err := netguard.NewPolicy(true, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestCredentialsReachNoSpanNorResult: an attempt with a secret header,
// a refused cached OAuth2 token and its refresh, and one whose token
// endpoint refuses the client, are recorded as spans; no span name,
// status, attribute or event, and no result error or excerpt, holds a
// header value, the client secret or a token.
func TestCredentialsReachNoSpanNorResult(t *testing.T) {
	te := newTokenEndpoint(t)
	rx := newTokenReceiver(t, "tok-1")
	rec := tracetest.NewSpanRecorder()
	c := New(mustPolicy(t), WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))))
	cr := te.creds(t, c, clientSecret)
	cr.header = http.Header{"X-Api-Key": {"hdr-value-41c9"}}
	r := request(t, rx.URL)
	r.Credentials = cr
	var results []Result
	for _, valid := range []string{"tok-1", "tok-2"} {
		rx.valid.Store(valid)
		res, err := c.Do(t.Context(), r)
		if err != nil || res.StatusCode != http.StatusNoContent {
			t.Fatalf("%d, %v", res.StatusCode, err)
		}
		results = append(results, res)
	}
	r.Credentials = te.creds(t, c, "wrong-"+clientSecret)
	res, _ := c.Do(t.Context(), r)
	results = append(results, res)
	var hay []string
	for _, s := range rec.Ended() {
		hay = append(hay, s.Name(), s.Status().Description)
		for _, a := range s.Attributes() {
			hay = append(hay, a.Value.String())
		}
		for _, e := range s.Events() {
			for _, a := range e.Attributes {
				hay = append(hay, a.Value.String())
			}
		}
	}
	for _, res := range results {
		hay = append(hay, string(res.Excerpt))
		if res.Err != nil {
			hay = append(hay, res.Err.Error())
		}
	}
	if len(rec.Ended()) != 3 {
		t.Fatalf("%d spans, want 3", len(rec.Ended()))
	}
	for _, h := range hay {
		for _, secret := range []string{"hdr-value-41c9", clientSecret, "tok-1", "tok-2"} {
			if strings.Contains(h, secret) {
				t.Fatalf("a span or result holds %q: %q", secret, h)
			}
		}
	}
}
