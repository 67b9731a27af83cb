// Package client is Hookline's Go SDK: a gRPC connection to ingest with
// the client-side retry discipline of SPEC R-CLIENT built in. A call is
// retried only on UNAVAILABLE, DEADLINE_EXCEEDED and RESOURCE_EXHAUSTED;
// the wait is the server's (a google.rpc.RetryInfo detail) when it sends
// one, else full jitter; a double budget (attempts and total time) ends
// it; a publish carries one idempotency key, made before the first try
// and reused on every retry; each retry is logged with its attempt number.
//
//	c, err := client.Dial("127.0.0.1:7070", client.WithAPIKey(key), client.WithInsecure())
//	resp, err := c.Events.PublishEvent(ctx, &hooklinev1.PublishEventRequest{
//		EventType: "invoice.paid", Payload: []byte(`{"id":"in_1"}`)})
package client

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/sdk/backoff"
	"github.com/hookline/hookline/sdk/ids"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Client is a connection to Hookline's ingest with its services'
// clients. It is safe for concurrent use; Close it when done.
type Client struct {
	conn *grpc.ClientConn

	Events     hooklinev1.EventServiceClient
	Endpoints  hooklinev1.EndpointServiceClient
	Deliveries hooklinev1.DeliveryServiceClient
	// Lanes lists and releases ordered endpoints' blocked lanes.
	Lanes hooklinev1.LaneServiceClient
}

// Dial connects to ingest at target ("host:port" or any gRPC target). It
// does not wait for the connection: the first call does.
func Dial(target string, opts ...Option) (*Client, error) {
	s := newSettings(opts)
	creds := credentials.NewTLS(s.tls)
	if s.insecure {
		creds = insecure.NewCredentials()
	}
	dopts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithChainUnaryInterceptor(s.loop().intercept),
	}, s.dialOpts...)
	if s.apiKey != "" {
		dopts = append(dopts, grpc.WithPerRPCCredentials(bearer{key: s.apiKey, secure: !s.insecure}))
	}
	conn, err := grpc.NewClient(target, dopts...)
	if err != nil {
		return nil, fmt.Errorf("hookline: connect to %s: %w", target, err)
	}
	return &Client{
		conn:       conn,
		Events:     hooklinev1.NewEventServiceClient(conn),
		Endpoints:  hooklinev1.NewEndpointServiceClient(conn),
		Deliveries: hooklinev1.NewDeliveryServiceClient(conn),
		Lanes:      hooklinev1.NewLaneServiceClient(conn),
	}, nil
}

// Conn returns the underlying connection, e.g. for the health service.
func (c *Client) Conn() *grpc.ClientConn { return c.conn }

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Option configures Dial or UnaryInterceptor.
type Option func(*settings)

// WithAPIKey sends key as "authorization: Bearer <key>" on every call
// (default none).
func WithAPIKey(key string) Option { return func(s *settings) { s.apiKey = key } }

// WithInsecure connects in plaintext (default TLS with the system roots).
func WithInsecure() Option { return func(s *settings) { s.insecure = true } }

// WithTLS connects with TLS configured by cfg (default: system roots,
// TLS 1.2 or newer).
func WithTLS(cfg *tls.Config) Option { return func(s *settings) { s.tls, s.insecure = cfg, false } }

// WithRetryPolicy sets the retry budgets and backoff (default
// DefaultRetryPolicy); its zero fields take the default's values.
func WithRetryPolicy(p RetryPolicy) Option { return func(s *settings) { s.policy = p } }

// WithLogger sets where retries are logged (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *settings) { s.log = l } }

// WithClock injects the clock the time budget is measured with (default
// time.Now).
func WithClock(now func() time.Time) Option { return func(s *settings) { s.now = now } }

// WithSleeper injects the wait between attempts (default: a timer that
// ends early, with ctx's error, when ctx ends).
func WithSleeper(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(s *settings) { s.sleep = sleep }
}

// WithRand injects the jitter's random source (default math/rand/v2's
// global source; *rand.Rand of a fixed seed makes runs repeatable). It
// must be safe for concurrent use if the client is.
func WithRand(r backoff.Rand) Option { return func(s *settings) { s.rand = r } }

// WithIdempotencyKeys sets how a publish sent without a key gets one
// (default "idem_" + a time-ordered random id). A key the caller set is
// always kept.
func WithIdempotencyKeys(newKey func() string) Option { return func(s *settings) { s.newKey = newKey } }

// WithDialOptions adds gRPC dial options (e.g. a custom dialer).
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(s *settings) { s.dialOpts = append(s.dialOpts, opts...) }
}

type settings struct {
	apiKey   string
	insecure bool
	tls      *tls.Config
	dialOpts []grpc.DialOption
	retrier  // what the retry loop is configured with
}

func newSettings(opts []Option) *settings {
	s := &settings{
		tls: &tls.Config{MinVersion: tls.VersionTLS12},
		retrier: retrier{
			policy: DefaultRetryPolicy,
			log:    slog.Default(),
			now:    time.Now,
			sleep:  sleepCtx,
			rand:   globalRand{},
		},
	}
	s.newKey = func() string { return ids.New("idem_", s.now()) }
	for _, o := range opts {
		o(s)
	}
	s.policy = s.policy.withDefaults()
	return s
}

// loop returns the configured retry loop.
func (s *settings) loop() *retrier {
	r := s.retrier
	return &r
}

// globalRand draws from math/rand/v2's global source, which is safe for
// concurrent use.
type globalRand struct{}

func (globalRand) Int64N(n int64) int64 { return rand.Int64N(n) }

// bearer is the per-call "authorization: Bearer <key>" credential.
type bearer struct {
	key    string
	secure bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.key}, nil
}

func (b bearer) RequireTransportSecurity() bool { return b.secure }
