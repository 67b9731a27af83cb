package ingest

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/filewatch"
	"github.com/hookline/hookline/platform/tlsconf"
	"github.com/hookline/hookline/services/ingest/apikey"
	"github.com/hookline/hookline/services/ingest/console"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// consoleServer serves the delivery console (package console) on its own
// port. It holds the console's flags, its session keys, where signed-out
// sessions are kept, the backend it shows (consoleBackend), the logger
// and the clock; nothing else.
type consoleServer struct {
	// ln, when set (WithConsoleListener), is where the console serves;
	// else addr (--console-addr), and with neither it is off.
	ln   net.Listener
	addr string
	// tlsCert and tlsKey are --console-tls-cert and --console-tls-key;
	// clientCA is --console-client-ca, and grpcClientCA --grpc-client-ca.
	tlsCert, tlsKey        string
	clientCA, grpcClientCA string
	// shutdownTimeout is --shutdown-timeout.
	shutdownTimeout time.Duration
	// keys seal console sessions (--console-session-key-file); the
	// first seals.
	keys [][]byte
	// revocations are the console's signed-out sessions.
	revocations console.Revocations
	backend     console.Backend
	log         *slog.Logger
	now         func() time.Time
}

// newConsoleServer returns the console of cfg, served on ln when it is
// set; it reads --console-session-key-file when the console is on,
// refusing a console without one.
func newConsoleServer(cfg Config, ln net.Listener, backend console.Backend, revocations console.Revocations, log *slog.Logger, now func() time.Time) (*consoleServer, error) {
	c := &consoleServer{
		ln:              ln,
		addr:            cfg.ConsoleAddr,
		tlsCert:         cfg.ConsoleTLSCert,
		tlsKey:          cfg.ConsoleTLSKey,
		clientCA:        cfg.ConsoleClientCA,
		grpcClientCA:    cfg.GRPCClientCA,
		shutdownTimeout: cfg.ShutdownTimeout,
		revocations:     revocations,
		backend:         backend,
		log:             log,
		now:             now,
	}
	if err := c.loadKeys(cfg.ConsoleSessionKeyFile); err != nil {
		return nil, err
	}
	return c, nil
}

// start serves the delivery console on --console-addr (or the
// WithConsoleListener listener) until the returned stop is called; a
// serving failure is sent on failed. Off when neither is set.
func (c *consoleServer) start(failed chan<- error) (func(), error) {
	ln := c.ln
	tlsOn := c.tlsCert != ""
	if ln == nil {
		if c.addr == "" {
			return func() {}, nil
		}
		if err := consoleAddrAllowed(c.addr, tlsOn); err != nil {
			return nil, err
		}
		var err error
		if ln, err = net.Listen("tcp", c.addr); err != nil {
			return nil, fmt.Errorf("ingest: --console-addr: %w", err)
		}
	}
	var opts []console.Option
	if tlsOn {
		conf, err := c.tlsConfig()
		if err != nil {
			_ = ln.Close()
			return nil, err
		}
		ln = tls.NewListener(ln, conf)
		opts = append(opts, console.WithTLS())
	} else if c.grpcClientCA != "" {
		c.log.Warn("the console is served without TLS (loopback), so it cannot ask for the client certificate --grpc-client-ca requires of API callers; set --console-tls-cert and --console-tls-key to require it")
	}
	srv := &http.Server{
		Handler:           console.New(c.backend, append(opts, console.WithLogger(c.log), console.WithClock(c.now), console.WithSessionKeys(c.keys...), console.WithRevocations(c.revocations))...).Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			select {
			case failed <- fmt.Errorf("console: %w", err):
			default:
			}
		}
	}()
	c.log.Info("delivery console serving", "addr", ln.Addr().String(), "tls", tlsOn, "client_certificates", tlsOn && (c.clientCA != "" || c.grpcClientCA != ""))
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.shutdownTimeout)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

// minConsoleKeyLen is the shortest console session key accepted, in
// characters: 32 random bytes in hex are 64.
const minConsoleKeyLen = 32

// errNoConsoleKey refuses a console without a session key: without one,
// session cookies would be sealed with something public or per-process.
var errNoConsoleKey = errors.New("the delivery console (--console-addr) needs --console-session-key-file (HOOKLINE_CONSOLE_SESSION_KEY_FILE): a file holding a secret random key of at least 32 characters, the same file on every replica; make one with: openssl rand -hex 32 > console-session.key")

// loadKeys reads --console-session-key-file (file) when the console is
// on, refusing a console without one.
func (c *consoleServer) loadKeys(file string) error {
	if c.ln == nil && c.addr == "" {
		return nil
	}
	if c.clientCA != "" && c.tlsCert == "" {
		return errors.New("--console-client-ca needs --console-tls-cert and --console-tls-key: only a TLS console can ask for client certificates")
	}
	if file == "" {
		return errNoConsoleKey
	}
	keys, err := readConsoleKeys(file)
	if err != nil {
		return fmt.Errorf("--console-session-key-file: %w", err)
	}
	c.keys = keys
	return nil
}

// readConsoleKeys returns the keys of a session key file: one per line,
// blank lines and '#' comments skipped, at least one, each at least
// minConsoleKeyLen characters.
func readConsoleKeys(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var keys [][]byte
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if len(line) < minConsoleKeyLen {
			return nil, fmt.Errorf("%s line %d: a session key must be at least %d characters (openssl rand -hex 32)", path, n+1, minConsoleKeyLen)
		}
		keys = append(keys, []byte(line))
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s holds no key: %w", path, errNoConsoleKey)
	}
	return keys, nil
}

// tlsConfig is the console's TLS configuration: its certificate and,
// from --console-client-ca or else --grpc-client-ca, the client CA whose
// certificate every console client must present (the same second factor
// the API asks for). Files are re-read when they change. HTTP/1.1 only.
func (c *consoleServer) tlsConfig() (*tls.Config, error) {
	clientCA := c.clientCA
	if clientCA == "" {
		clientCA = c.grpcClientCA
	}
	conf, err := tlsconf.Server(c.tlsCert, c.tlsKey, clientCA, filewatch.WithClock(c.now), filewatch.WithReport(func(err error) {
		if err != nil {
			c.log.Error("console TLS files not reloaded; the previous certificate stays in force", "cert", c.tlsCert, "err", err)
		}
	}))
	if err != nil {
		return nil, fmt.Errorf("ingest: --console-tls-cert/--console-tls-key/--console-client-ca: %w", err)
	}
	files := conf.GetConfigForClient
	conf.NextProtos = []string{"http/1.1"}
	conf.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		c, err := files(hello)
		if err != nil {
			return nil, err
		}
		c = c.Clone()
		c.NextProtos = []string{"http/1.1"}
		return c, nil
	}
	return conf, nil
}

// consoleAddrAllowed keeps a console without TLS on loopback.
func consoleAddrAllowed(addr string, tlsOn bool) error {
	if tlsOn {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("ingest: --console-addr %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return nil
	}
	return fmt.Errorf("ingest: --console-addr %q is not a loopback address: a console without TLS serves loopback only; set --console-tls-cert and --console-tls-key to serve it further", addr)
}

// consoleBackend is the console's view of the Service: the same calls
// the gRPC API makes, for the tenant in the context.
type consoleBackend struct{ s *Service }

// SignIn admits keys that may read deliveries (scope read or admin);
// admin keys may also resend and recover, as through the API.
func (b consoleBackend) SignIn(key string) (string, bool, bool) {
	return b.SignedIn(sha256.Sum256([]byte(key)))
}

// SignedIn checks a session's key again, by its hash: a revoked key
// ends its sessions on every replica.
func (b consoleBackend) SignedIn(sum [sha256.Size]byte) (string, bool, bool) {
	p, ok := b.s.keys.ResolveSum(sum)
	if !ok || !p.Scope.Allows(hooklinev1.DeliveryService_ListDeliveries_FullMethodName) {
		return "", false, false
	}
	return p.Tenant, p.Scope == apikey.ScopeAdmin, true
}

// recentForHealth is how many of an endpoint's latest deliveries its
// health is judged on.
const recentForHealth = 5

func (b consoleBackend) Endpoints(ctx context.Context) ([]console.EndpointHealth, error) {
	resp, err := b.s.endpointAPI.ListEndpoints(ctx, &hooklinev1.ListEndpointsRequest{PageSize: maxPageSize})
	if err != nil {
		return nil, err
	}
	if err := b.s.deliveries.syncIndex(ctx); err != nil {
		return nil, err
	}
	tenant := apikey.TenantFrom(ctx)
	out := make([]console.EndpointHealth, 0, len(resp.GetEndpoints()))
	for _, ep := range resp.GetEndpoints() {
		recent, err := b.s.deliveries.history.Recent(tenant, ep.GetId(), recentForHealth)
		if err != nil {
			return nil, historyStatus(err)
		}
		out = append(out, healthOf(ep, recent, b.s.now()))
	}
	return out, nil
}

// healthOf judges an endpoint by its status and its latest deliveries,
// newest first, up to the latest delivered one, as of now — by what the
// dispatcher does, not by how many failed:
//   - paused: its status says so;
//   - outage mode: a delivery of the run is held (console.Held: a retry
//     long past its due time with no newer result — the dispatcher holds
//     deliveries without a result only in outage mode, or when it spills a
//     backlog), and outage mode is not disabled for the endpoint;
//   - failing: any other failure in the run — retries not yet due, or
//     deliveries that failed for good (a 410 to everything fails every
//     delivery at once and never puts the endpoint in outage mode);
//   - active otherwise.
func healthOf(ep *hooklinev1.Endpoint, recent []*hooklinev1.DeliveryStatus, now time.Time) console.EndpointHealth {
	h := console.EndpointHealth{Endpoint: ep, Health: console.HealthActive}
	if ep.GetStatus() == hooklinev1.EndpointStatus_ENDPOINT_STATUS_PAUSED {
		h.Health, h.Detail = console.HealthPaused, ep.GetPausedReason()
		return h
	}
	retrying, failed, held := 0, 0, 0
recent:
	for _, d := range recent {
		switch d.GetState() {
		case hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED:
			retrying++
			if console.Held(d, now) != "" {
				held++
			}
			continue
		case hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, hooklinev1.DeliveryState_DELIVERY_STATE_EXPIRED,
			hooklinev1.DeliveryState_DELIVERY_STATE_BLOCKED:
			failed++
			continue
		case hooklinev1.DeliveryState_DELIVERY_STATE_PENDING, hooklinev1.DeliveryState_DELIVERY_STATE_PARKED:
			continue // not settled: says nothing yet
		}
		break recent
	}
	switch {
	case held > 0 && !ep.GetOutageModeDisabled():
		h.Health, h.Detail = console.HealthOutage, fmt.Sprintf("the latest %d deliveries failed transiently; deliveries are held without spending attempts while the dispatcher probes the endpoint", retrying+failed)
	case failed > 0 && retrying == 0:
		h.Health, h.Detail = console.HealthFailing, fmt.Sprintf("the latest %d deliveries failed for good (not retried): check the endpoint's URL and what it answers", failed)
	case failed+retrying > 0:
		h.Health, h.Detail = console.HealthFailing, fmt.Sprintf("the latest %d deliveries failed", failed+retrying)
	}
	return h
}

func (b consoleBackend) Event(ctx context.Context, id string) (*hooklinev1.GetEventResponse, error) {
	return b.s.deliveryAPI.GetEvent(ctx, &hooklinev1.GetEventRequest{EventId: id})
}

// ListDeliveries is the console's log: newest first.
func (b consoleBackend) ListDeliveries(ctx context.Context, req *hooklinev1.ListDeliveriesRequest) (*hooklinev1.ListDeliveriesResponse, error) {
	return b.s.deliveries.listDeliveries(ctx, req, true)
}

func (b consoleBackend) GetDelivery(ctx context.Context, id string) (*hooklinev1.GetDeliveryResponse, error) {
	return b.s.deliveryAPI.GetDelivery(ctx, &hooklinev1.GetDeliveryRequest{DeliveryId: id})
}

func (b consoleBackend) Resend(ctx context.Context, id string) (uint32, error) {
	resp, err := b.s.deliveryAPI.ResendDelivery(ctx, &hooklinev1.ResendDeliveryRequest{DeliveryId: id})
	return resp.GetAttempt(), err
}

func (b consoleBackend) Recover(ctx context.Context, endpointID string, since time.Time) (int, int, error) {
	ep, err := b.s.endpoints.owned(ctx, endpointID)
	if err != nil {
		return 0, 0, err
	}
	if ep.GetEndpoint().GetStatus() == hooklinev1.EndpointStatus_ENDPOINT_STATUS_PAUSED {
		return 0, 0, status.Errorf(codes.FailedPrecondition, "endpoint %s is paused; resume it before recovering", endpointID)
	}
	until := b.s.now()
	if !since.Before(until) {
		return 0, 0, invalid("since", "must be in the past")
	}
	todo, unavailable, err := b.s.deliveries.redeliverFailed(ctx, apikey.TenantFrom(ctx), endpointID, since, until)
	return len(todo), unavailable, err
}

// URLNote is the note CreateEndpoint sends for the URL (urlNote).
func (b consoleBackend) URLNote(ctx context.Context, url string) string {
	return b.s.urls.urlNote(ctx, url)
}
