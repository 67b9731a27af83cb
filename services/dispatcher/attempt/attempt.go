// Package attempt makes one signed HTTP attempt of a webhook delivery:
// fresh timestamp and signature per attempt, no redirects followed, a
// bounded response read, a per-attempt timeout, and the SSRF guard on
// the resolved address at dial time (through an egress proxy too); with
// the endpoint's credentials (custom headers, basic, bearer or OAuth2
// auth, a client certificate) when it has any.
package attempt

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/classify"
	"github.com/hookline/hookline/platform/netguard"
	"github.com/hookline/hookline/platform/telemetry"
	"github.com/hookline/hookline/sdk/sign"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// Limits on what is read of a response.
const (
	// ExcerptBytes of the response body are kept for the results topic.
	ExcerptBytes = 1024
	// drainBytes are read at most so the connection can be reused.
	drainBytes = 64 << 10
)

// maxIdlePerHost is the most idle connections kept to one receiver host:
// about as many attempts as the default attempt memory allows in flight.
const maxIdlePerHost = 8192

// Client sends attempts. It keeps a keep-alive connection pool per
// receiver host — one per guard: the tenants with an allow-list of their
// own get a pool of their own, so no tenant's request rides a connection
// another tenant's guard admitted — and is safe for concurrent use.
type Client struct {
	policy  *netguard.Policy
	base    *http.Client
	tenants map[string]*http.Client
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	// egress, when set, tunnels every connection through a proxy
	// (WithEgressProxy); tenantEgress overrides it per tenant (nil
	// value: direct) (WithTenantEgressProxies).
	egress       *egress
	tenantEgress map[string]*egress
	// traceState and baggage are the tracestate list-members and baggage
	// members forwarded to receivers, by key ("*": all).
	traceState, baggage map[string]bool
	userAgent           string
	now                 func() time.Time
	tracer              trace.Tracer
}

// Option configures a Client.
type Option func(*Client)

// WithClock makes the Client take attempt timestamps from now (default
// time.Now).
func WithClock(now func() time.Time) Option { return func(c *Client) { c.now = now } }

// WithDialContext replaces how connections are made (default: a
// net.Dialer whose Control runs the SSRF guard). A replacement bypasses
// the guard: it is for tests on in-memory networks.
func WithDialContext(dial func(ctx context.Context, network, addr string) (net.Conn, error)) Option {
	return func(c *Client) { c.dial = dial }
}

// WithTracerProvider makes each attempt an HTTP client span from tp
// (default: the global provider).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *Client) { c.tracer = tp.Tracer("github.com/hookline/hookline/services/dispatcher/attempt") }
}

// WithUserAgent sets the User-Agent header (default "Hookline/1").
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// WithForwardedTraceContext names what of a producer's trace context,
// besides traceparent, receivers get: the tracestate list-members and
// the baggage members with these keys ("*": all). Default: none —
// receivers are third parties, and tracestate and baggage may carry a
// producer's internal vendor state, user ids or tokens.
func WithForwardedTraceContext(traceStateKeys, baggageKeys []string) Option {
	set := func(keys []string) map[string]bool {
		m := map[string]bool{}
		for _, k := range keys {
			if k = strings.TrimSpace(k); k != "" {
				m[k] = true
			}
		}
		return m
	}
	return func(c *Client) { c.traceState, c.baggage = set(traceStateKeys), set(baggageKeys) }
}

// New returns a Client whose dials are checked by the guard policy
// gives each request's tenant.
func New(policy *netguard.Policy, opts ...Option) *Client {
	c := &Client{
		policy:    policy,
		userAgent: "Hookline/1",
		now:       time.Now,
		tracer:    otel.GetTracerProvider().Tracer("github.com/hookline/hookline/services/dispatcher/attempt"),
	}
	for _, o := range opts {
		o(c)
	}
	c.base = c.newHTTP(policy.Base(), c.egress, nil)
	c.tenants = map[string]*http.Client{}
	for _, t := range policy.Tenants() {
		c.tenants[t] = c.newHTTP(policy.For(t), c.egressFor(t), nil)
	}
	for t := range c.tenantEgress {
		if c.tenants[t] == nil {
			c.tenants[t] = c.newHTTP(policy.For(t), c.egressFor(t), nil)
		}
	}
	return c
}

// newHTTP returns an HTTP client whose connections guard admits,
// through eg (nil: direct), with tlsConf's client certificate and roots
// (nil: none, the system's).
func (c *Client) newHTTP(guard *netguard.Guard, eg *egress, tlsConf *tls.Config) *http.Client {
	dial := c.dial
	switch {
	case dial != nil:
	case eg != nil:
		dial = eg.dialer(guard)
	default:
		dial = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: guard.Control}).DialContext
	}
	tr := &http.Transport{
		Proxy:             nil, // never route receivers through an environment proxy
		DialContext:       dial,
		ForceAttemptHTTP2: true,
		// Keep every connection the attempts in flight used: the
		// dispatcher's attempt memory budget (charged per attempt,
		// connection included) bounds how many there are, and a pool
		// smaller than the attempts in flight to one host closes and
		// redials connections all the time (measured: dialing was 19%
		// of the dispatcher's CPU with 6,400 attempts in flight to one
		// receiver host and 256 idle connections per host).
		MaxIdleConns:           0, // no limit but the per-host one
		MaxIdleConnsPerHost:    maxIdlePerHost,
		IdleConnTimeout:        30 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
		TLSClientConfig:        tlsConf,
	}
	return &http.Client{
		Transport: tr,
		// A 3xx is an outcome, not a hop (R-CLASS-1).
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// forHTTP returns the HTTP client of tenant's guard.
func (c *Client) forHTTP(tenant string) *http.Client {
	if hc, ok := c.tenants[tenant]; ok {
		return hc
	}
	return c.base
}

// Request is one attempt to make.
type Request struct {
	URL string
	// Method is POST, PUT or PATCH (a transformation's choice); empty
	// means POST.
	Method string
	// Tenant owns the endpoint: its guard checks the dial.
	Tenant    string
	EventID   string
	EventType string
	Payload   []byte
	Signer    *sign.Signer
	// Timeout bounds the whole attempt, connect to last byte.
	Timeout time.Duration
	// Header holds extra headers (a transformation's).
	Header http.Header
	// Credentials are the endpoint's custom headers, receiver auth and
	// client certificate (nil: none).
	Credentials *Credentials
	// Attributes are added to the attempt's span (hookline.event_id …).
	Attributes []attribute.KeyValue
}

// Result is what one attempt came to.
type Result struct {
	Class      hooklinev1.OutcomeClass
	StatusCode int
	// Err is the transport error; nil when a response arrived.
	Err        error
	Started    time.Time
	Latency    time.Duration
	Excerpt    []byte
	RetryAfter string
	// SpanContext is the attempt's HTTP client span, whose traceparent
	// the receiver got.
	SpanContext trace.SpanContext
}

// Do makes the attempt. It returns ctx's error, and no Result, only when
// ctx ended before the request was sent: a worker fault, not a failed
// attempt (R-CLASS-3).
func (c *Client) Do(ctx context.Context, r Request) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	method := r.Method
	if method == "" {
		method = http.MethodPost
	}
	// The span is named for the method sent (a transformation may have
	// chosen PUT or PATCH), as OpenTelemetry's HTTP conventions name it.
	ctx, span := c.tracer.Start(ctx, method, trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	recording := span.IsRecording()
	actx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, method, r.URL, bytes.NewReader(r.Payload))
	if err != nil {
		// An endpoint URL that cannot make a request is the endpoint's
		// fault and will not fix itself: permanent.
		span.SetStatus(codes.Error, "invalid endpoint URL")
		return Result{Class: hooklinev1.OutcomeClass_OUTCOME_CLASS_PERMANENT, Err: fmt.Errorf("invalid endpoint URL: %w", err), Started: c.now()}, nil
	}
	if recording {
		span.SetAttributes(append(urlAttributes(method, req.URL), r.Attributes...)...)
	}
	started := c.now()
	h := req.Header
	r.Credentials.apply(h)
	for k, v := range r.Header {
		h[k] = v
	}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", c.userAgent)
	h.Set(sign.HeaderID, r.EventID)
	h.Set(sign.HeaderTimestamp, strconv.FormatInt(started.Unix(), 10))
	h.Set(sign.HeaderSignature, r.Signer.Sign(r.EventID, started, r.Payload))
	if r.EventType != "" {
		h.Set("webhook-event-type", r.EventType)
	}
	// The receiver's spans join the delivery's trace under this one; of
	// the producer's trace context only what is allow-listed goes along.
	telemetry.Propagator.Inject(c.forwarded(ctx, span.SpanContext()), propagation.HeaderCarrier(h))

	hc := c.forHTTP(r.Tenant)
	if tc := r.Credentials.tlsClient(); tc != nil {
		hc = tc // the endpoint's client certificate: a pool of its own
	}
	res := Result{Started: started, SpanContext: span.SpanContext()}
	gen, fresh, err := r.Credentials.authorize(actx, h, 0)
	if err != nil {
		return c.unauthorized(ctx, span, res, err)
	}
	resp, err := hc.Do(req)
	if err == nil && resp.StatusCode == http.StatusUnauthorized && gen != 0 && !fresh {
		// The receiver refused a token cached from an earlier attempt
		// (revoked, or expired early): one fresh token, one more send,
		// within this attempt.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainBytes))
		_ = resp.Body.Close()
		again := req.Clone(actx)
		again.Body, _ = req.GetBody() // a bytes.Reader's: never fails
		if _, _, err := r.Credentials.authorize(actx, again.Header, gen); err != nil {
			return c.unauthorized(ctx, span, res, err)
		}
		req = again
		resp, err = hc.Do(req)
	}
	if err != nil {
		if ctx.Err() != nil {
			// Shut down before the receiver answered: not the receiver's
			// failure, so no attempt is counted; the caller decides.
			span.SetStatus(codes.Error, "shut down before the receiver answered; not counted as an attempt")
			return Result{}, ctx.Err()
		}
		// net/http wraps the error with the full URL, whose query may
		// hold a credential; the URL is known to whoever reads the result.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		var dnsErr *net.DNSError
		host := req.URL.Hostname()
		_, literalErr := netip.ParseAddr(host)
		switch {
		case errors.As(err, &dnsErr),
			errors.Is(err, classify.ErrRefusedDestination) && literalErr != nil:
			// A name that fails to resolve and one that resolves to a
			// refused address read alike (netguard.Unresolvable): the
			// resolver's text names its address and the pod's, and two
			// different answers would tell a tenant whose endpoint
			// name points at an internal one whether that name exists.
			err = netguard.Unresolvable(host)
		case errors.Is(err, classify.ErrRefusedDestination):
			// A literal address the guard refuses: permanent.
			err = fmt.Errorf("%w: %s is a private/internal address", classify.ErrRefusedDestination, host)
		case errors.Is(err, context.DeadlineExceeded):
			err = fmt.Errorf("no response within %v: %w", r.Timeout, err)
		}
		res.Err = err
		res.Latency = c.now().Sub(started)
		res.Class = classify.Outcome(0, err)
		if recording {
			span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)), attribute.String("hookline.outcome.class", classify.Label(res.Class)))
			span.SetStatus(codes.Error, err.Error())
		}
		return res, nil
	}
	defer resp.Body.Close()
	var excerpt bytes.Buffer
	_, _ = io.Copy(&excerpt, io.LimitReader(resp.Body, ExcerptBytes))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainBytes))
	res.Latency = c.now().Sub(started)
	res.StatusCode = resp.StatusCode
	res.Excerpt = excerpt.Bytes()
	res.RetryAfter = resp.Header.Get("Retry-After")
	res.Class = classify.Outcome(resp.StatusCode, nil)
	if !recording {
		return res, nil
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode), attribute.String("hookline.outcome.class", classify.Label(res.Class)))
	if res.Class != hooklinev1.OutcomeClass_OUTCOME_CLASS_SUCCESS {
		span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(resp.StatusCode)))
		span.SetStatus(codes.Error, "HTTP "+strconv.Itoa(resp.StatusCode))
	}
	return res, nil
}

// unauthorized is the result of an attempt whose receiver auth failed
// before the request was sent: an OAuth2 token endpoint that failed
// (transient) or refused the client (permanent). It returns ctx's error,
// and no Result, when ctx ended first (not an attempt).
func (c *Client) unauthorized(ctx context.Context, span trace.Span, res Result, err error) (Result, error) {
	if ctx.Err() != nil {
		span.SetStatus(codes.Error, "shut down before the receiver answered; not counted as an attempt")
		return Result{}, ctx.Err()
	}
	res.Err = err
	res.Latency = c.now().Sub(res.Started)
	res.Class = classify.Outcome(0, err)
	if span.IsRecording() {
		span.SetAttributes(semconv.ErrorTypeKey.String("oauth2_token"), attribute.String("hookline.outcome.class", classify.Label(res.Class)))
		span.SetStatus(codes.Error, err.Error())
	}
	return res, nil
}

// forwarded returns a context carrying the attempt's span context and
// the baggage, each reduced to what receivers may get: traceparent
// always, tracestate list-members and baggage members only by key.
func (c *Client) forwarded(ctx context.Context, sc trace.SpanContext) context.Context {
	ts := sc.TraceState()
	if !c.traceState["*"] {
		ts.Walk(func(k, _ string) bool {
			if !c.traceState[k] {
				ts = ts.Delete(k)
			}
			return true
		})
	}
	var keep []baggage.Member
	if all := c.baggage["*"]; all || len(c.baggage) > 0 {
		for _, m := range baggage.FromContext(ctx).Members() {
			if all || c.baggage[m.Key()] {
				keep = append(keep, m)
			}
		}
	}
	bg, _ := baggage.New(keep...)
	return baggage.ContextWithBaggage(trace.ContextWithSpanContext(context.Background(), sc.WithTraceState(ts)), bg)
}

// urlAttributes describes the request: its method and the receiver's
// URL without its query string or user info, which may hold credentials.
func urlAttributes(method string, u *url.URL) []attribute.KeyValue {
	clean := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	attrs := []attribute.KeyValue{
		semconv.HTTPRequestMethodKey.String(method),
		semconv.URLFull(clean.String()),
		semconv.ServerAddress(u.Hostname()),
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if p, err := strconv.Atoi(port); err == nil {
		attrs = append(attrs, semconv.ServerPort(p))
	}
	return attrs
}

// errorType is the error.type of a transport failure.
func errorType(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	if errors.Is(err, netguard.ErrUnresolvable) {
		return "dns"
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return oe.Op
	}
	return "transport"
}
