package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/sdk/client"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/durationpb"
)

// fakeIngest answers each call with the next scripted error (nil: OK)
// and records what each attempt carried.
type fakeIngest struct {
	hooklinev1.UnimplementedEventServiceServer
	hooklinev1.UnimplementedEndpointServiceServer

	mu     sync.Mutex
	script []error
	keys   []string
	auth   []string
	calls  int
}

func (f *fakeIngest) next(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	md, _ := metadata.FromIncomingContext(ctx)
	f.auth = append(f.auth, md.Get("authorization")...)
	if len(f.script) == 0 {
		return status.Error(codes.Unavailable, "script exhausted")
	}
	err := f.script[0]
	f.script = f.script[1:]
	return err
}

func (f *fakeIngest) PublishEvent(ctx context.Context, req *hooklinev1.PublishEventRequest) (*hooklinev1.PublishEventResponse, error) {
	f.mu.Lock()
	f.keys = append(f.keys, req.GetIdempotencyKey())
	f.mu.Unlock()
	if err := f.next(ctx); err != nil {
		return nil, err
	}
	return &hooklinev1.PublishEventResponse{EventId: "evt_1"}, nil
}

func (f *fakeIngest) CreateEndpoint(ctx context.Context, _ *hooklinev1.CreateEndpointRequest) (*hooklinev1.CreateEndpointResponse, error) {
	if err := f.next(ctx); err != nil {
		return nil, err
	}
	return &hooklinev1.CreateEndpointResponse{}, nil
}

func (f *fakeIngest) GetEndpoint(ctx context.Context, _ *hooklinev1.GetEndpointRequest) (*hooklinev1.GetEndpointResponse, error) {
	if err := f.next(ctx); err != nil {
		return nil, err
	}
	return &hooklinev1.GetEndpointResponse{}, nil
}

// clock is a fake time that moves only when the client sleeps.
type clock struct {
	mu     sync.Mutex
	t      time.Time
	sleeps []time.Duration
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) sleep(_ context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.t = c.t.Add(d)
	return nil
}

// maxRand always draws the largest value, so a full-jitter wait equals
// its cap and the expected waits are exact.
type maxRand struct{}

func (maxRand) Int64N(n int64) int64 { return n - 1 }

func unavailable() error { return status.Error(codes.Unavailable, "kafka down") }

func withRetryInfo(c codes.Code, d time.Duration) error {
	s, err := status.New(c, "slow down").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
	if err != nil {
		panic(err)
	}
	return s.Err()
}

func start(t *testing.T, f *fakeIngest, opts ...client.Option) (*client.Client, *clock, *bytes.Buffer) {
	t.Helper()
	ln := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	hooklinev1.RegisterEventServiceServer(srv, f)
	hooklinev1.RegisterEndpointServiceServer(srv, f)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	logs := &bytes.Buffer{}
	n := 0
	base := []client.Option{
		client.WithInsecure(),
		client.WithAPIKey("hk_test"),
		client.WithDialOptions(grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return ln.DialContext(ctx) })),
		client.WithClock(clk.now),
		client.WithSleeper(clk.sleep),
		client.WithRand(maxRand{}),
		client.WithLogger(slog.New(slog.NewJSONHandler(logs, nil))),
		client.WithIdempotencyKeys(func() string { n++; return "idem_" + string(rune('a'-1+n)) }),
	}
	c, err := client.Dial("passthrough:///bufnet", append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, clk, logs
}

// retryLines returns the attempt number of each "retrying" log line.
func retryLines(t *testing.T, logs *bytes.Buffer) []int {
	t.Helper()
	var attempts []int
	dec := json.NewDecoder(logs)
	for dec.More() {
		var line struct {
			Msg     string `json:"msg"`
			Attempt int    `json:"attempt"`
			Key     string `json:"idempotency_key"`
		}
		if err := dec.Decode(&line); err != nil {
			t.Fatal(err)
		}
		if line.Msg == "hookline: retrying" {
			attempts = append(attempts, line.Attempt)
		}
	}
	return attempts
}

func TestPublishRetryDiscipline(t *testing.T) {
	policy := client.RetryPolicy{MaxAttempts: 4, MaxElapsed: time.Minute, Initial: 100 * time.Millisecond, Max: time.Second}
	tests := []struct {
		name         string
		script       []error
		policy       client.RetryPolicy
		key          string // the caller's own key, if any
		wantCode     codes.Code
		wantAttempts int
		wantSleeps   []time.Duration
		wantBudget   string // which budget ended it, if one did
	}{
		{
			name:         "transient errors then success: same key every time",
			script:       []error{unavailable(), status.Error(codes.DeadlineExceeded, "slow"), status.Error(codes.ResourceExhausted, "busy"), nil},
			policy:       policy,
			wantCode:     codes.OK,
			wantAttempts: 4,
			// full jitter drawn at its maximum: min(1s, 100ms·2^(n-1))
			wantSleeps: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond},
		},
		{
			name:         "INVALID_ARGUMENT is not retried",
			script:       []error{status.Error(codes.InvalidArgument, "event_type: is required")},
			policy:       policy,
			wantCode:     codes.InvalidArgument,
			wantAttempts: 1,
		},
		{
			name:         "UNAUTHENTICATED after a retry is not retried again",
			script:       []error{unavailable(), status.Error(codes.Unauthenticated, "bad key")},
			policy:       policy,
			wantCode:     codes.Unauthenticated,
			wantAttempts: 2,
			wantSleeps:   []time.Duration{100 * time.Millisecond},
		},
		{
			name:         "attempt budget",
			script:       []error{unavailable(), unavailable(), unavailable(), unavailable(), nil},
			policy:       policy,
			wantCode:     codes.Unavailable,
			wantAttempts: 4,
			wantSleeps:   []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond},
			wantBudget:   "attempts",
		},
		{
			name:   "time budget ends it before the attempt budget",
			script: []error{unavailable(), unavailable(), unavailable(), unavailable(), nil},
			// 100+200 ms slept; the next wait (400 ms) would end past 500 ms.
			policy:       client.RetryPolicy{MaxAttempts: 10, MaxElapsed: 500 * time.Millisecond, Initial: 100 * time.Millisecond, Max: time.Second},
			wantCode:     codes.Unavailable,
			wantAttempts: 3,
			wantSleeps:   []time.Duration{100 * time.Millisecond, 200 * time.Millisecond},
			wantBudget:   "time",
		},
		{
			name:         "the server's RetryInfo delay is honoured, not the backoff",
			script:       []error{withRetryInfo(codes.ResourceExhausted, 7*time.Second), withRetryInfo(codes.Unavailable, 3*time.Second), nil},
			policy:       policy,
			wantCode:     codes.OK,
			wantAttempts: 3,
			wantSleeps:   []time.Duration{7 * time.Second, 3 * time.Second},
		},
		{
			name:         "a server delay past the time budget gives up without waiting",
			script:       []error{withRetryInfo(codes.Unavailable, 2*time.Minute), nil},
			policy:       policy,
			wantCode:     codes.Unavailable,
			wantAttempts: 1,
			wantBudget:   "time",
		},
		{
			name:         "the caller's own key is kept",
			script:       []error{unavailable(), nil},
			policy:       policy,
			key:          "order-42",
			wantCode:     codes.OK,
			wantAttempts: 2,
			wantSleeps:   []time.Duration{100 * time.Millisecond},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeIngest{script: tt.script}
			c, clk, logs := start(t, f, client.WithRetryPolicy(tt.policy))
			req := &hooklinev1.PublishEventRequest{EventType: "invoice.paid", Payload: []byte(`{}`), IdempotencyKey: tt.key}
			_, err := c.Events.PublishEvent(t.Context(), req)
			if got := status.Code(err); got != tt.wantCode {
				t.Fatalf("code = %v (%v), want %v", got, err, tt.wantCode)
			}
			if f.calls != tt.wantAttempts {
				t.Errorf("attempts = %d, want %d", f.calls, tt.wantAttempts)
			}
			wantKey := tt.key
			if wantKey == "" {
				wantKey = "idem_a" // made once, before the first try
			}
			for i, k := range f.keys {
				if k != wantKey {
					t.Errorf("attempt %d sent key %q, want %q on every attempt", i+1, k, wantKey)
				}
			}
			if req.GetIdempotencyKey() != tt.key {
				t.Errorf("the caller's request was changed: key %q", req.GetIdempotencyKey())
			}
			if !slices.Equal(clk.sleeps, tt.wantSleeps) {
				t.Errorf("sleeps = %v, want %v", clk.sleeps, tt.wantSleeps)
			}
			var wantLogged []int
			for i := range tt.wantSleeps {
				wantLogged = append(wantLogged, i+2)
			}
			if got := retryLines(t, logs); !slices.Equal(got, wantLogged) {
				t.Errorf("retries logged with attempts %v, want %v", got, wantLogged)
			}
			var giveUp *client.GiveUpError
			if tt.wantBudget == "" && errors.As(err, &giveUp) {
				t.Errorf("unexpected give-up: %v", err)
			}
			if tt.wantBudget != "" && (!errors.As(err, &giveUp) || giveUp.Budget != tt.wantBudget || giveUp.Attempts != tt.wantAttempts) {
				t.Errorf("err = %v, want a give-up on the %s budget after %d attempts", err, tt.wantBudget, tt.wantAttempts)
			}
			for _, a := range f.auth {
				if a != "Bearer hk_test" {
					t.Errorf("authorization = %q", a)
				}
			}
		})
	}
}

func TestEachPublishGetsItsOwnKey(t *testing.T) {
	f := &fakeIngest{script: []error{unavailable(), nil, nil}}
	c, _, _ := start(t, f)
	for range 2 {
		if _, err := c.Events.PublishEvent(t.Context(), &hooklinev1.PublishEventRequest{EventType: "a.b", Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"idem_a", "idem_a", "idem_b"}; !slices.Equal(f.keys, want) {
		t.Fatalf("keys = %v, want %v", f.keys, want)
	}
}

func TestOnlySafeCallsAreRetried(t *testing.T) {
	tests := []struct {
		name         string
		call         func(*client.Client, context.Context) error
		wantAttempts int
	}{
		{"GetEndpoint is a read: retried", func(c *client.Client, ctx context.Context) error {
			_, err := c.Endpoints.GetEndpoint(ctx, &hooklinev1.GetEndpointRequest{Id: "ep_1"})
			return err
		}, 2},
		{"CreateEndpoint has no key: tried once", func(c *client.Client, ctx context.Context) error {
			_, err := c.Endpoints.CreateEndpoint(ctx, &hooklinev1.CreateEndpointRequest{Url: "https://x.test"})
			return err
		}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeIngest{script: []error{unavailable(), nil}}
			c, _, _ := start(t, f)
			err := tt.call(c, t.Context())
			if f.calls != tt.wantAttempts {
				t.Fatalf("attempts = %d (err %v), want %d", f.calls, err, tt.wantAttempts)
			}
		})
	}
}

func TestCanceledContextStopsRetries(t *testing.T) {
	f := &fakeIngest{script: []error{unavailable(), nil}}
	ctx, cancel := context.WithCancel(t.Context())
	sleeper := client.WithSleeper(func(ctx context.Context, _ time.Duration) error {
		cancel()
		<-ctx.Done()
		return ctx.Err()
	})
	c, _, _ := start(t, f, sleeper)
	_, err := c.Events.PublishEvent(ctx, &hooklinev1.PublishEventRequest{EventType: "a.b", Payload: []byte(`{}`)})
	if status.Code(err) != codes.Canceled || f.calls != 1 {
		t.Fatalf("err = %v after %d attempts, want CANCELED after 1", err, f.calls)
	}
}
