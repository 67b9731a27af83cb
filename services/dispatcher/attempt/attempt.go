// Package attempt makes one signed HTTP attempt of a webhook delivery:
// fresh timestamp and signature per attempt, no redirects followed, a
// bounded response read, a per-attempt timeout, and the SSRF guard on
// the resolved address at dial time.
package attempt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/classify"
	"github.com/hookline/hookline/platform/netguard"
	"github.com/hookline/hookline/platform/sign"
)

// Limits on what is read of a response.
const (
	// ExcerptBytes of the response body are kept for the results topic.
	ExcerptBytes = 1024
	// drainBytes are read at most so the connection can be reused.
	drainBytes = 64 << 10
)

// Client sends attempts. It keeps a keep-alive connection pool per
// receiver host and is safe for concurrent use.
type Client struct {
	http      *http.Client
	userAgent string
	now       func() time.Time
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
	return func(c *Client) { c.http.Transport.(*http.Transport).DialContext = dial }
}

// WithUserAgent sets the User-Agent header (default "Hookline/1").
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// New returns a Client whose dials are checked by guard.
func New(guard *netguard.Guard, opts ...Option) *Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: guard.Control}
	tr := &http.Transport{
		Proxy:                  nil, // never route receivers through an environment proxy
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           4096,
		MaxIdleConnsPerHost:    256,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	c := &Client{
		http: &http.Client{
			Transport: tr,
			// A 3xx is an outcome, not a hop (R-CLASS-1).
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		userAgent: "Hookline/1",
		now:       time.Now,
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Request is one attempt to make.
type Request struct {
	URL       string
	EventID   string
	EventType string
	Payload   []byte
	Signer    *sign.Signer
	// Timeout bounds the whole attempt, connect to last byte.
	Timeout time.Duration
	// Header holds extra headers, such as traceparent.
	Header http.Header
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
}

// Do makes the attempt. It returns ctx's error, and no Result, only when
// ctx ended before the request was sent: a worker fault, not a failed
// attempt (R-CLASS-3).
func (c *Client) Do(ctx context.Context, r Request) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	actx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, r.URL, bytes.NewReader(r.Payload))
	if err != nil {
		// An endpoint URL that cannot make a request is the endpoint's
		// fault and will not fix itself: permanent.
		return Result{Class: hooklinev1.OutcomeClass_OUTCOME_CLASS_PERMANENT, Err: fmt.Errorf("invalid endpoint URL: %w", err), Started: c.now()}, nil
	}
	started := c.now()
	h := req.Header
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

	resp, err := c.http.Do(req)
	res := Result{Started: started}
	if err != nil {
		if ctx.Err() != nil {
			// Shut down before the receiver answered: not the receiver's
			// failure, so no attempt is counted; the caller decides.
			return Result{}, ctx.Err()
		}
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no response within %v: %w", r.Timeout, err)
		}
		res.Err = err
		res.Latency = c.now().Sub(started)
		res.Class = classify.Outcome(0, err)
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
	return res, nil
}
