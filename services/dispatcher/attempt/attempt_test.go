package attempt

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/netguard"
	"github.com/hookline/hookline/sdk/sign"
	"go.opentelemetry.io/otel/baggage"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

func testClient(t *testing.T, allowPrivate bool) *Client {
	t.Helper()
	g, err := netguard.NewPolicy(allowPrivate, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return New(g)
}

func request(t *testing.T, url string) Request {
	t.Helper()
	s, err := sign.NewSigner(sign.GenerateSecret())
	if err != nil {
		t.Fatal(err)
	}
	return Request{URL: url, EventID: "evt_1", EventType: "a.b", Payload: []byte(`{"a":1}`), Signer: s, Timeout: 2 * time.Second}
}

func TestRedirectIsAnOutcomeNotAHop(t *testing.T) {
	var followed atomic.Bool
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { followed.Store(true) }))
	defer target.Close()
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL, http.StatusTemporaryRedirect)
	}))
	defer rx.Close()
	res, err := testClient(t, true).Do(t.Context(), request(t, rx.URL))
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 307 || res.Class != hooklinev1.OutcomeClass_OUTCOME_CLASS_TRANSIENT || followed.Load() {
		t.Fatalf("got %d %v (followed=%v), want 307 transient, not followed", res.StatusCode, res.Class, followed.Load())
	}
}

func TestTimeoutIsATransientAttempt(t *testing.T) {
	release := make(chan struct{})
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer rx.Close()
	defer close(release)
	req := request(t, rx.URL)
	req.Timeout = 100 * time.Millisecond
	res, err := testClient(t, true).Do(t.Context(), req)
	if err != nil {
		t.Fatalf("a receiver timeout is an attempt outcome, not a worker fault: %v", err)
	}
	if res.Class != hooklinev1.OutcomeClass_OUTCOME_CLASS_TRANSIENT || res.Err == nil || !strings.Contains(res.Err.Error(), "no response within") {
		t.Fatalf("got %+v", res)
	}
}

func TestResponseReadIsBounded(t *testing.T) {
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "120")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(strings.Repeat("x", 1<<20)))
	}))
	defer rx.Close()
	res, err := testClient(t, true).Do(t.Context(), request(t, rx.URL))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Excerpt) != ExcerptBytes || res.RetryAfter != "120" || res.StatusCode != 429 {
		t.Fatalf("excerpt %d bytes, Retry-After %q, status %d", len(res.Excerpt), res.RetryAfter, res.StatusCode)
	}
}

func TestHeadersAreSignedFreshPerAttempt(t *testing.T) {
	var got []http.Header
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Clone())
	}))
	defer rx.Close()
	now := time.Unix(1_700_000_000, 0)
	g, _ := netguard.NewPolicy(true, nil, nil)
	c := New(g, WithClock(func() time.Time { now = now.Add(time.Minute); return now }))
	req := request(t, rx.URL)
	for range 2 {
		if _, err := c.Do(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	if got[0].Get("webhook-id") != "evt_1" || got[1].Get("webhook-id") != "evt_1" {
		t.Fatal("webhook-id must be the event id on every attempt")
	}
	if got[0].Get("webhook-timestamp") == got[1].Get("webhook-timestamp") || got[0].Get("webhook-signature") == got[1].Get("webhook-signature") {
		t.Fatal("each attempt must carry a fresh timestamp and signature")
	}
	if got[0].Get("Content-Type") != "application/json" {
		t.Fatalf("content type %q", got[0].Get("Content-Type"))
	}
}

func TestGuardRefusesLoopbackPermanently(t *testing.T) {
	var hit atomic.Bool
	rx := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit.Store(true) }))
	defer rx.Close()
	res, err := testClient(t, false).Do(t.Context(), request(t, rx.URL))
	if err != nil {
		t.Fatal(err)
	}
	if res.Class != hooklinev1.OutcomeClass_OUTCOME_CLASS_PERMANENT || hit.Load() {
		t.Fatalf("got %v (receiver hit=%v), want permanent and never reached", res.Class, hit.Load())
	}
}

func TestShutdownBeforeSendingIsAWorkerFault(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := testClient(t, true).Do(ctx, request(t, "http://127.0.0.1:1"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled (no attempt made)", err)
	}
}

// A refused dial to a name says only that the name does not resolve to
// an allowed address, never the address it resolved to.
func TestRefusedDialDoesNotNameTheAddress(t *testing.T) {
	rx := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer rx.Close()
	res, err := testClient(t, false).Do(t.Context(), request(t, strings.Replace(rx.URL, "127.0.0.1", "localhost", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if res.Err == nil || strings.Contains(res.Err.Error(), "127.0.0.1") || res.Err.Error() != `cannot resolve "localhost" to an allowed address` {
		t.Fatalf("refusal %v: want 'cannot resolve \"localhost\" to an allowed address' without the address", res.Err)
	}
}

// TestDialTimeDNSFailuresAndPrivateAnswersReadAlike: at dial time a name
// the resolver fails on (not found, timed out, server failure: the
// resolver's text names its address and the pod's address and port) and
// a name that resolves to an internal address get the same result, error
// and class, so a tenant who points its endpoint's name at an internal
// one (a CNAME) learns nothing about whether that name exists.
func TestDialTimeDNSFailuresAndPrivateAnswersReadAlike(t *testing.T) {
	rx := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer rx.Close()
	private, err := testClient(t, false).Do(t.Context(), request(t, strings.Replace(rx.URL, "127.0.0.1", "localhost", 1)))
	if err != nil {
		t.Fatal(err)
	}
	failures := []*net.DNSError{
		{Err: "no such host", Name: "localhost", Server: "10.96.0.10:53", IsNotFound: true},
		{Err: "read udp 10.244.1.5:41234->10.96.0.10:53: i/o timeout", Name: "localhost", Server: "10.96.0.10:53", IsTimeout: true},
		{Err: "server misbehaving", Name: "localhost", Server: "10.96.0.10:53"},
	}
	for _, dnsErr := range failures {
		g, _ := netguard.NewPolicy(false, nil, nil)
		c := New(g, WithDialContext(func(context.Context, string, string) (net.Conn, error) {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: dnsErr}
		}))
		res, err := c.Do(t.Context(), request(t, strings.Replace(rx.URL, "127.0.0.1", "localhost", 1)))
		if err != nil {
			t.Fatal(err)
		}
		if res.Err == nil || res.Err.Error() != private.Err.Error() || res.Class != private.Class {
			t.Errorf("DNS failure %q: result %v (%v), want what a private answer gets: %v (%v)", dnsErr.Err, res.Err, res.Class, private.Err, private.Class)
		}
		if res.Class != hooklinev1.OutcomeClass_OUTCOME_CLASS_TRANSIENT {
			t.Errorf("DNS failure %q: class %v, want transient (R-CLASS)", dnsErr.Err, res.Class)
		}
		for _, leak := range []string{"10.96", ":53", "41234", "lookup"} {
			if res.Err != nil && strings.Contains(res.Err.Error(), leak) {
				t.Errorf("DNS failure %q: result %q names %q", dnsErr.Err, res.Err, leak)
			}
		}
	}
}

// A tenant's own allow-list admits its receivers only: another tenant's
// request to the same host and port is refused even with the first
// tenant's connection idle in a pool.
func TestTenantAllowListDoesNotLeakThroughPooledConnections(t *testing.T) {
	var hits atomic.Int32
	rx := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer rx.Close()
	p, err := netguard.NewPolicy(false, nil, []string{"acme=127.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	c := New(p)
	mine := request(t, rx.URL)
	mine.Tenant = "acme"
	if res, err := c.Do(t.Context(), mine); err != nil || res.Class != hooklinev1.OutcomeClass_OUTCOME_CLASS_SUCCESS {
		t.Fatalf("acme's allow-listed receiver: %+v, %v", res, err)
	}
	theirs := request(t, rx.URL)
	theirs.Tenant = "other"
	res, err := c.Do(t.Context(), theirs)
	if err != nil {
		t.Fatal(err)
	}
	if res.Class != hooklinev1.OutcomeClass_OUTCOME_CLASS_PERMANENT || hits.Load() != 1 {
		t.Fatalf("another tenant: %v with %d receiver hits, want permanent and 1 hit (acme's)", res.Class, hits.Load())
	}
}

// Receivers get traceparent only: a producer's tracestate and baggage
// stay inside Hookline unless their keys are allow-listed.
func TestReceiversGetTraceparentOnlyUnlessAllowListed(t *testing.T) {
	var got []http.Header
	rx := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = append(got, r.Header.Clone()) }))
	defer rx.Close()
	ts, err := trace.ParseTraceState("vendor=internal-state,acct=42")
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true,
	})
	bg, err := baggage.Parse("user.id=alice,session.token=s3cr3t")
	if err != nil {
		t.Fatal(err)
	}
	ctx := baggage.ContextWithBaggage(trace.ContextWithRemoteSpanContext(t.Context(), sc), bg)
	p, _ := netguard.NewPolicy(true, nil, nil)
	for _, c := range []*Client{New(p), New(p, WithForwardedTraceContext([]string{"vendor"}, []string{"user.id"}))} {
		if _, err := c.Do(ctx, request(t, rx.URL)); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.HasPrefix(got[0].Get("traceparent"), "00-"+sc.TraceID().String()) {
		t.Fatalf("traceparent %q, want the producer's trace", got[0].Get("traceparent"))
	}
	if v := got[0].Values("tracestate"); len(v) != 0 {
		t.Fatalf("tracestate %q forwarded by default", v)
	}
	if v := got[0].Values("baggage"); len(v) != 0 {
		t.Fatalf("baggage %q forwarded by default", v)
	}
	if v := got[1].Get("tracestate"); v != "vendor=internal-state" {
		t.Fatalf("allow-listed tracestate %q, want vendor=internal-state only", v)
	}
	if v := got[1].Get("baggage"); v != "user.id=alice" {
		t.Fatalf("allow-listed baggage %q, want user.id=alice only", v)
	}
}

// TestClientSpanNamesTheMethodSent: the attempt's client span and its
// http.request.method are the method actually sent, POST by default and
// a transformation's PUT or PATCH otherwise.
func TestClientSpanNamesTheMethodSent(t *testing.T) {
	var sent []string
	rx := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { sent = append(sent, r.Method) }))
	defer rx.Close()
	rec := tracetest.NewSpanRecorder()
	p, _ := netguard.NewPolicy(true, nil, nil)
	c := New(p, WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))))
	for _, give := range []string{"", http.MethodPut, http.MethodPatch} {
		r := request(t, rx.URL)
		r.Method = give
		if _, err := c.Do(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{http.MethodPost, http.MethodPut, http.MethodPatch}
	spans := rec.Ended()
	if len(spans) != len(want) || strings.Join(sent, ",") != strings.Join(want, ",") {
		t.Fatalf("%d spans, methods sent %v; want %v", len(spans), sent, want)
	}
	for i, s := range spans {
		var attr string
		for _, kv := range s.Attributes() {
			if kv.Key == semconv.HTTPRequestMethodKey {
				attr = kv.Value.AsString()
			}
		}
		if s.Name() != want[i] || attr != want[i] {
			t.Errorf("span %d: name %q, http.request.method %q; want %s", i, s.Name(), attr, want[i])
		}
	}
}
