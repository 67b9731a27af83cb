// Package ingest is Hookline's gRPC edge: API-key auth, validation,
// endpoint administration (kept in the compacted endpoints topic), and
// event publishing with fan-out to one Delivery record per matching
// endpoint, durable in Kafka before the call returns.
//
// Each hookline.v1 service is served by a handler type of its own
// (handlers.go): eventService (events.go), endpointService
// (endpointhandlers.go, filtertest.go), deliveryService (deliveries.go,
// search.go, recover.go, testevent.go) and laneService (lanes.go). The
// Service they share holds the views (endpoints, lanes), the idempotent
// publisher (package idempotency, with its view of the claims), auth,
// admission, the held budget, the write limits and one field for each
// part below, and runs the process (Run): the gRPC server and its
// HTTP/JSON gateway on one port (gateway.go) and the console
// (console.go).
//
// Other parts are types of their own beside the Service, each holding
// only what it uses: the edge (edge.go, preauth.go) secures the port and
// authenticates each caller before a body or a message is read; the
// gateway (gateway.go) turns HTTP/JSON calls into gRPC ones;
// consoleServer (console.go) serves the console; endpointSecrets
// (secrets.go) seals the endpoints' signing secrets at rest;
// kafkaProducer (kafkaproducer.go) is the producer every write goes
// through; endpointWriter (endpointwrites.go) writes endpoint records and
// reads them back before a call answers; urlRules (endpointrules.go)
// checks endpoint URLs and their destinations; contentRules
// (contentfilter.go, transformation.go, filtertest.go) compiles and runs
// the endpoints' content filters and transformations; fanOut (events.go,
// fanout.go) decides a publish's targets and writes its Delivery
// records; deliveryHistory (history.go, search.go, deliveries.go,
// recover.go) keeps the delivery history index and answers and recovers
// from it.
package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/celfilter"
	"github.com/hookline/hookline/platform/connmux"
	"github.com/hookline/hookline/platform/endpoints"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/keyring"
	"github.com/hookline/hookline/platform/lanes"
	"github.com/hookline/hookline/platform/supervise"
	"github.com/hookline/hookline/platform/telemetry"
	"github.com/hookline/hookline/platform/transform"
	"github.com/hookline/hookline/sdk/ids"
	"github.com/hookline/hookline/services/ingest/apikey"
	"github.com/hookline/hookline/services/ingest/idempotency"
	"github.com/hookline/hookline/services/ingest/pagetoken"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// Service is one ingest instance.
type Service struct {
	// The gRPC handlers, one per service (handlers.go).
	eventAPI    *eventService
	endpointAPI *endpointService
	deliveryAPI *deliveryService
	laneAPI     *laneService

	cfg Config
	log *slog.Logger
	now func() time.Time
	// keys are the API keys the edge loads: the auth interceptors' and
	// the console's.
	keys *apikey.Keys
	// keyring authenticates the Delivery records this service writes
	// (recordmac.go); secrets seals the endpoint secrets this service
	// writes and opens the ones it answers, with it (secrets.go).
	keyring *keyring.Keyring
	secrets *endpointSecrets
	store   *endpoints.Store
	// endpoints writes endpoint records to the endpoints topic, read back
	// by store before a call answers (endpointwrites.go).
	endpoints *endpointWriter
	topics    hkafka.Topics
	ln        net.Listener
	// lookup is WithResolver's input; urls checks endpoint URLs with it
	// (endpointrules.go).
	lookup func(ctx context.Context, host string) ([]net.IP, error)
	urls   *urlRules

	// kafka is the producer every write goes through; Run sets its
	// client (kafkaproducer.go).
	kafka *kafkaProducer
	// fanout decides a publish's targets and writes its Delivery records
	// (events.go, fanout.go).
	fanout *fanOut
	// idempotent publishes the events that carry an idempotency key, by
	// the claims idemFollow reads into its view.
	idempotent *idempotency.Publisher
	idemFollow *hkafka.Follower
	// lanes is the lanes topic (LaneService), fed by laneFollow.
	lanes      *lanes.View
	laneFollow *hkafka.Follower
	// deliveries reads the delivery history (history.go, search.go,
	// deliveries.go, recover.go); tokens sign the list pages.
	deliveries *deliveryHistory
	tokens     *pagetoken.Codec
	// consoleLn, when set, is where the console serves (New hands it to
	// the console).
	consoleLn net.Listener
	// console serves the delivery console on its own port (console.go).
	console *consoleServer
	// revocations are the console's signed-out sessions.
	revocations *sessionRevocations
	// admission bounds the bytes of publishes held at once.
	admission *admission
	// held bounds the payload bytes a tenant's paused endpoints hold.
	held *heldBudget
	// edge secures the listener and authenticates callers before a body
	// or a message is read (edge.go, preauth.go).
	edge *edge
	// limits rate-limit every write RPC per tenant.
	limits *writeLimits
	// longCalls caps each tenant's long calls in progress.
	longCalls *longCalls
	// fieldRules checks each request against its proto's field rules
	// (fieldrules.go).
	fieldRules *fieldRules
	// content compiles and runs the endpoints' content filters and
	// transformations (contentfilter.go, transformation.go,
	// filtertest.go).
	content *contentRules

	tp trace.TracerProvider
	mp metric.MeterProvider
}

// Option configures a Service.
type Option func(*Service)

// WithClock injects the clock (default time.Now).
func WithClock(now func() time.Time) Option { return func(s *Service) { s.now = now } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *Service) { s.log = l } }

// WithTelemetry sets the tracer and meter providers (default: the global
// ones, no-op unless a program installed others).
func WithTelemetry(tp trace.TracerProvider, mp metric.MeterProvider) Option {
	return func(s *Service) { s.tp, s.mp = tp, mp }
}

// WithConsoleListener serves the console on ln instead of listening on
// Config.ConsoleAddr.
func WithConsoleListener(ln net.Listener) Option { return func(s *Service) { s.consoleLn = ln } }

// WithListener serves on ln instead of listening on Config.GRPCAddr.
func WithListener(ln net.Listener) Option { return func(s *Service) { s.ln = ln } }

// WithResolver replaces DNS resolution of endpoint hosts when a URL is
// set (default net.DefaultResolver). Each lookup's ctx ends after
// --dns-timeout.
func WithResolver(lookup func(ctx context.Context, host string) ([]net.IP, error)) Option {
	return func(s *Service) { s.lookup = lookup }
}

// New validates cfg and returns a Service.
func New(cfg Config, opts ...Option) (*Service, error) {
	guard, err := cfg.Policy()
	if err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	if cfg.MaxPayloadBytes < 1 || cfg.MaxPayloadBytes > hkafka.MaxRecordBytes/2 {
		return nil, fmt.Errorf("ingest: --max-payload-bytes must be between 1 and %d", hkafka.MaxRecordBytes/2)
	}
	if cfg.MaxInFlightBytes <= 0 {
		return nil, errors.New("ingest: --max-in-flight-bytes must be positive")
	}
	if cfg.MaxUnauthenticatedBytes < preauthConnCost || cfg.HTTPBodyTimeout <= 0 {
		return nil, fmt.Errorf("ingest: --max-unauthenticated-bytes must be at least %d and --http-body-timeout positive", preauthConnCost)
	}
	if cfg.DNSTimeout <= 0 {
		return nil, errors.New("ingest: --dns-timeout must be positive")
	}
	if cfg.IdempotencyTTL <= 0 {
		return nil, errors.New("ingest: --idempotency-ttl must be positive")
	}
	if cfg.MaxLongCallsPerTenant < 1 || cfg.HTTPCallTimeout <= 0 {
		return nil, errors.New("ingest: --max-long-calls-per-tenant must be at least 1 and --http-call-timeout positive")
	}
	if err := cfg.checkLimits(); err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	if _, err := cfg.Kafka.ProducerOpts(); err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	rules, err := newFieldRules()
	if err != nil {
		return nil, err
	}
	kr, err := cfg.Secrets.Keyring()
	if err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	s := &Service{
		keyring:    kr,
		fieldRules: rules,
		cfg:        cfg,
		log:        slog.Default(),
		now:        time.Now,
		store:      endpoints.NewStore(),
		topics:     cfg.Kafka.Topics(),
		lookup: func(ctx context.Context, host string) ([]net.IP, error) {
			return net.DefaultResolver.LookupIP(ctx, "ip", host)
		},
		admission: &admission{limit: cfg.MaxInFlightBytes, writeWait: cfg.PublishTimeout},
		tp:        otel.GetTracerProvider(),
		mp:        otel.GetMeterProvider(),
	}
	s.held = &heldBudget{limit: cfg.MaxHeldBytesPerTenant, paused: func(tenant string) []string { return pausedEndpoints(s.store, tenant) },
		unended: func(tenant string, eps []string) (map[string]int64, map[int32]int64, error) {
			return s.deliveries.history.Unended(tenant, eps)
		}}
	s.handlers()
	for _, o := range opts {
		o(s)
	}
	// now reads the Service's clock at each call (tests change it after
	// New).
	now := func() time.Time { return s.now() }
	s.secrets = &endpointSecrets{keyring: kr, log: s.log}
	if s.edge, err = newEdge(cfg, s.log, s.now, now); err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	s.keys = s.edge.keys
	s.kafka = &kafkaProducer{timeout: cfg.PublishTimeout}
	s.urls = &urlRules{allowHTTP: cfg.AllowHTTP, dnsTimeout: cfg.DNSTimeout, guard: guard, lookup: s.lookup}
	s.endpoints = &endpointWriter{store: s.store, kafka: s.kafka, topic: s.topics.Endpoints, publishTimeout: cfg.PublishTimeout, now: now}
	s.revocations = newSessionRevocations(s.topics.ConsoleSessions, now, s.kafka.produce)
	if s.console, err = newConsoleServer(cfg, s.consoleLn, consoleBackend{s}, s.revocations, s.log, now); err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	// Every client of this service records its Kafka metrics.
	s.cfg.Kafka.ClientOpts = append(slices.Clip(s.cfg.Kafka.ClientOpts), telemetry.KafkaClientMetrics(s.mp)...)
	instanceID := ids.New("ing_", s.now())
	s.limits = newWriteLimits(cfg, now)
	s.longCalls = newLongCalls(cfg.MaxLongCallsPerTenant)
	filterErrors, err := newFilterErrors(s.mp)
	if err != nil {
		return nil, err
	}
	s.content = &contentRules{
		filters:         celfilter.NewCache(celfilter.DefaultCacheSize),
		transforms:      transform.NewCache(transform.DefaultCacheSize),
		filterErrors:    filterErrors,
		log:             s.log,
		maxPayloadBytes: cfg.MaxPayloadBytes,
		urls:            s.urls,
		endpoints:       s.endpoints,
	}
	s.fanout = &fanOut{
		store:          s.store,
		endpoints:      s.endpoints,
		content:        s.content,
		held:           s.held,
		kafka:          s.kafka,
		keyring:        kr,
		topic:          s.topics.Deliveries,
		publishTimeout: cfg.PublishTimeout,
		maxFanoutBytes: cfg.MaxFanoutBytes,
	}
	idem := idempotency.NewView(s.now, cfg.IdempotencyTTL)
	s.idemFollow = hkafka.NewFollower(idem.Apply, s.topics.Idempotency)
	s.idempotent = idempotency.NewPublisher(idempotency.Deps{
		View:           idem,
		Follower:       s.idemFollow,
		Topic:          s.topics.Idempotency,
		PublishTimeout: cfg.PublishTimeout,
		TTL:            cfg.IdempotencyTTL,
		InstanceID:     instanceID,
		Now:            now,
		Log:            s.log,
		Targets:        s.fanout.targets,
		Deliver:        s.fanout.publishClaimed,
		Produce:        s.kafka.produce,
		KafkaOpts:      func() ([]kgo.Opt, error) { return s.cfg.Kafka.Opts() },
		KafkaStatus:    kafkaStatus,
	})
	s.lanes = lanes.NewView()
	s.laneFollow = hkafka.NewFollower(s.lanes.Apply, s.topics.Lanes)
	s.tokens = pagetoken.New(pageTokenKey(cfg))
	s.deliveries = &deliveryHistory{
		dataDir:              cfg.DataDir,
		cacheBytes:           cfg.HistoryCache,
		topics:               s.topics,
		retention:            cfg.Kafka.Retention,
		holdRetention:        cfg.Kafka.HoldRetention,
		recoverMaxWindow:     cfg.RecoverMaxWindow,
		recoverMaxDeliveries: cfg.RecoverMaxDeliveries,
		store:                s.store,
		tokens:               s.tokens,
		admission:            s.admission,
		kafka:                s.kafka,
		log:                  s.log,
		now:                  now,
	}
	return s, nil
}

// Run serves until ctx ends. It creates the topics if needed, reads the
// endpoints topic to its end before serving, and on shutdown reports
// NOT_SERVING, lets in-flight calls finish (bounded by ShutdownTimeout),
// then closes its Kafka clients.
func (s *Service) Run(ctx context.Context) error {
	opts, err := s.cfg.Kafka.Opts()
	if err != nil {
		return err
	}
	// The producer starts each delivery's trace: a publish span per
	// record, child of the caller's RPC span, its traceparent in the
	// record's headers.
	opts = append(opts, telemetry.KafkaProducerTracing(s.tp)...)
	popts, err := s.cfg.Kafka.ProducerOpts()
	if err != nil {
		return err
	}
	opts = append(opts, popts...)
	cl, err := kgo.NewClient(append(opts,
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(s.cfg.PublishTimeout),
		kgo.ProducerBatchMaxBytes(hkafka.MaxRecordBytes),
	)...)
	if err != nil {
		return fmt.Errorf("ingest: kafka client: %w", err)
	}
	defer cl.Close()
	s.kafka.client = cl
	specs := append(s.cfg.Kafka.Specs(), hkafka.TopicSpec{Name: s.topics.Idempotency, Configs: map[string]string{
		// Time retention, not compaction: compaction keeps a key's last
		// record, which may be a losing claim. Twice the TTL keeps every
		// claim a live key's winner could be compared with.
		"cleanup.policy": "delete",
		"retention.ms":   strconv.FormatInt((2 * s.cfg.IdempotencyTTL).Milliseconds(), 10),
	}}, s.revocations.spec())
	if err := s.cfg.Kafka.EnsureTopics(ctx, kadm.NewClient(cl), specs); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return fmt.Errorf("ingest: %w", err)
	}

	// The parts of a serving ingest, in their start order; they stop in
	// the reverse one (platform/supervise): the servers first
	// (NOT_SERVING, the calls in flight finish, the producer flushes what
	// they wrote), then the history sweep and the followers that feed
	// the idempotency view and the delivery index, then the endpoints'
	// repair; the gateway, the history index and the endpoints view
	// (deferred) outlive them all.
	g := supervise.New(ctx)
	stopStore, err := s.store.StartWatched(g.Context(), s.cfg.Kafka, func(err error) { g.Stop(fmt.Errorf("ingest: endpoints: %w", err)) })
	if err != nil {
		g.Stop(fmt.Errorf("ingest: endpoints: %w", err)) // nil when stopped while starting
		return g.Wait()
	}
	defer stopStore()
	// Repair keeps every endpoint's last record a winner, so compaction
	// never resurrects a change that lost (platform/endpoints).
	g.Go(supervise.Part{Name: "ingest: endpoints repair", Run: func(ctx context.Context) error {
		return s.store.Repair(ctx, func(ctx context.Context, rs ...*kgo.Record) error {
			err := s.kafka.produce(ctx, rs...)
			if err != nil {
				s.log.WarnContext(ctx, "endpoints: repair not written; retrying", "err", err)
			}
			return err
		}, time.Second)
	}})

	hist, err := s.deliveries.openHistory()
	if err != nil {
		g.Stop(err)
		return g.Wait()
	}
	defer func() {
		if err := hist.Close(); err != nil {
			s.log.Warn("history: close", "err", err)
		}
	}()
	for _, f := range s.followers() {
		g.Go(supervise.Part{Name: "ingest", Run: func(ctx context.Context) error { return f.Run(ctx, s.cfg.Kafka) }})
	}
	g.Go(supervise.Part{Name: "ingest: history sweep", Run: func(ctx context.Context) error {
		s.deliveries.sweepHistory(ctx)
		return nil
	}})

	ln := s.ln
	if ln == nil {
		if ln, err = net.Listen("tcp", s.cfg.GRPCAddr); err != nil {
			g.Stop(fmt.Errorf("ingest: listen: %w", err))
			return g.Wait()
		}
	}
	// Charged until each connection's first authenticated call; raw
	// bytes, so a TLS handshake counts too.
	ln = s.edge.secureListener(s.edge.preauth.listener(ln))
	srv, hs := s.grpcServer()
	gw, err := newGateway(g.Context(), srv, s.cfg.MaxPayloadBytes, s.cfg.HTTPCallTimeout)
	if err != nil {
		_ = ln.Close()
		g.Stop(err)
		return g.Wait()
	}
	defer gw.Close()
	g.Go(supervise.Part{Name: "ingest: serve", Run: func(ctx context.Context) error { return s.serve(ctx, ln, srv, hs, gw) }})
	return g.Wait()
}

// serve answers gRPC and HTTP/JSON on ln, and the console on its own
// port, until ctx ends; then it reports NOT_SERVING, lets the calls in
// flight finish (bounded by ShutdownTimeout) and flushes what they
// produced.
func (s *Service) serve(ctx context.Context, ln net.Listener, srv *grpc.Server, hs *health.Server, gw *gateway) error {
	// One port: gRPC (HTTP/2) connections to srv, HTTP/1.1 to the
	// HTTP/JSON gateway.
	mux := connmux.New(ln, sniffTimeout)
	httpSrv := &http.Server{
		// The key is checked on the headers, before any body is read.
		Handler:           s.edge.authHTTP(gw),
		ReadHeaderTimeout: sniffTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 3)
	go func() { served <- srv.Serve(mux.GRPC()) }()
	go func() { served <- httpSrv.Serve(mux.HTTP()) }()
	go func() { served <- mux.Serve() }()
	stopConsole, err := s.console.start(served)
	if err != nil {
		srv.Stop()
		_ = httpSrv.Close()
		return err
	}
	defer stopConsole()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.log.Info("ingest serving", "addr", ln.Addr().String(), "protocols", "gRPC, HTTP/JSON")

	select {
	case err := <-served:
		srv.Stop()
		_ = httpSrv.Close()
		return fmt.Errorf("ingest: serve: %w", err)
	case <-ctx.Done():
	}
	hs.Shutdown() // NOT_SERVING, so balancers move away first
	stopped := make(chan struct{})
	drainCtx, stopDrain := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer stopDrain()
	go func() {
		var wg sync.WaitGroup
		wg.Go(func() { _ = httpSrv.Shutdown(drainCtx) })
		srv.GracefulStop()
		wg.Wait()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-drainCtx.Done():
		_ = httpSrv.Close()
		srv.Stop()
		<-stopped
	}
	flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	if err := s.kafka.client.Flush(flushCtx); err != nil {
		return fmt.Errorf("ingest: flush: %w", err)
	}
	return nil
}

func (s *Service) grpcServer() (*grpc.Server, *health.Server) {
	needsAuth := selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool {
		return c.Service != healthpb.Health_ServiceDesc.ServiceName &&
			c.Service != "grpc.reflection.v1.ServerReflection" &&
			c.Service != "grpc.reflection.v1alpha.ServerReflection"
	})
	onPanic := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		s.log.ErrorContext(ctx, "panic in handler", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		return status.Error(codes.Internal, "internal error")
	})
	srv := grpc.NewServer(
		// First in the chain: the RPC's span (the caller's traceparent
		// honoured) and rpc.server.call.duration by method and status.
		grpc.StatsHandler(otelgrpc.NewServerHandler(
			otelgrpc.WithTracerProvider(s.tp),
			otelgrpc.WithMeterProvider(s.mp),
			otelgrpc.WithPropagators(telemetry.Propagator),
			otelgrpc.WithFilter(func(info *stats.RPCTagInfo) bool {
				return !strings.HasPrefix(info.FullMethodName, "/grpc.health.") && !strings.HasPrefix(info.FullMethodName, "/grpc.reflection.")
			}),
		)),
		grpc.MaxRecvMsgSize(payloadLimit(s.cfg.MaxPayloadBytes).doorBytes()),
		// The API key is checked when a stream's headers arrive, before
		// any of its message is received (the interceptor checks scope).
		grpc.InTapHandle(s.edge.tapAuth),
		grpc.MaxHeaderListSize(maxHeaderBytes),
		grpc.MaxConcurrentStreams(s.cfg.MaxConcurrentStreams),
		// Calls run on a pool of goroutines that keep their grown
		// stacks, instead of a new goroutine per call that grows its
		// stack again through the interceptor chain (runtime.newstack
		// and copystack were 3% of CPU at 4,000 publishes/s); when every
		// worker is busy a call still gets a goroutine of its own.
		grpc.NumStreamWorkers(streamWorkers),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: s.cfg.KeepaliveMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: s.cfg.KeepaliveTime, Timeout: s.cfg.KeepaliveTimeout}),
		grpc.ChainUnaryInterceptor(
			unaryCallLog(s.log),
			selector.UnaryServerInterceptor(auth.UnaryServerInterceptor(s.keys.AuthFunc), needsAuth),
			s.limits.unaryInterceptor,
			s.longCalls.unaryInterceptor,
			s.fieldRules.unary,
			recovery.UnaryServerInterceptor(onPanic),
		),
		grpc.ChainStreamInterceptor(
			streamCallLog(s.log),
			selector.StreamServerInterceptor(auth.StreamServerInterceptor(s.keys.AuthFunc), needsAuth),
			s.limits.streamInterceptor,
			s.fieldRules.stream,
			recovery.StreamServerInterceptor(onPanic),
		),
	)
	hooklinev1.RegisterEventServiceServer(srv, s.eventAPI)
	hooklinev1.RegisterEndpointServiceServer(srv, s.endpointAPI)
	hooklinev1.RegisterDeliveryServiceServer(srv, s.deliveryAPI)
	hooklinev1.RegisterLaneServiceServer(srv, s.laneAPI)
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv)
	return srv, hs
}

// streamWorkers is the gRPC server's pool of call goroutines: about the
// calls in flight at a few thousand publishes a second (each waits a few
// milliseconds for Kafka).
const streamWorkers = 128

// sniffTimeout bounds how long a new connection may take to show whether
// it is gRPC or HTTP/1.1, and an HTTP request to send its headers.
const sniffTimeout = 10 * time.Second

// errPublishTimeout ends a publish that Kafka did not confirm within
// --publish-timeout.
var errPublishTimeout = errors.New("the write was not confirmed by Kafka within --publish-timeout")

// kafkaStatus maps a failed Kafka call to the caller's status: the
// caller's own deadline is DeadlineExceeded, anything else (our own
// --publish-timeout included) UNAVAILABLE. Either way the call's writes
// may or may not have landed: a write in flight cannot be called back.
// Retrying with the same idempotency key is always safe.
func kafkaStatus(ctx context.Context, what string, err error) error {
	if cause := context.Cause(ctx); errors.Is(cause, errPublishTimeout) {
		return status.Errorf(codes.Unavailable, "%s: %v (%v); it may still be written: retry with the same idempotency key", what, cause, err)
	}
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		return status.Errorf(codes.DeadlineExceeded, "%s: deadline passed before Kafka confirmed the write; retry with the same idempotency key", what)
	}
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return status.Errorf(codes.Canceled, "%s: canceled before Kafka confirmed the write", what)
	}
	return status.Errorf(codes.Unavailable, "%s: Kafka did not confirm the write (%v); retry with the same idempotency key", what, err)
}

// followers returns the topic readers Run starts.
func (s *Service) followers() []*hkafka.Follower {
	return []*hkafka.Follower{s.idemFollow, s.deliveries.indexFollow, s.laneFollow, s.revocations.follow}
}
