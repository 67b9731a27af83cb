package dispatcher

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/endpoints"
	phealth "github.com/hookline/hookline/platform/health"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/lanes"
	"github.com/hookline/hookline/platform/netguard"
	"github.com/hookline/hookline/platform/supervise"
	"github.com/hookline/hookline/platform/telemetry"
	"github.com/hookline/hookline/sdk/sign"
	"github.com/hookline/hookline/services/dispatcher/attempt"
	"github.com/hookline/hookline/services/dispatcher/health"
	"github.com/hookline/hookline/services/dispatcher/notify"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Service is one dispatcher instance.
type Service struct {
	cfg   Config
	log   *slog.Logger
	now   func() time.Time
	rand  *lockedRand
	store *endpoints.Store
	// noticeClient posts to --notice-webhook-url.
	noticeClient *attempt.Client
	topics       hkafka.Topics

	attemptOpts []attempt.Option
	// beforeAttempt, if set, is called as each attempt begins (tests):
	// WithBeforeAttempt sets it, New hands it to the attempter.
	beforeAttempt func(*hooklinev1.Delivery)
	// setAsideHook, if set, learns of each delivery set aside (tests):
	// WithSetAside sets it, New hands it to the writer.
	setAsideHook func(*hooklinev1.Delivery)
	// writer builds the records that follow a delivery and checks them
	// against Kafka's limits (writer.go); built by New once the options
	// are applied.
	writer *recordWriter
	rcv    *health.Receivers
	// pauses are automatic pauses written and not settled yet
	// (autopause.go).
	pauses pendingPauses
	// aborts counts commits aborted in a row, per partition (commit
	// goroutines only, one at a time); the deliveries a broker refused a
	// record of are the writer's (writer.unwritable).
	aborts hkafka.Backoff
	// holds holds deliveries without an attempt and ends their holds
	// (hold.go); built by New once the options are applied.
	holds *holds
	// handler handles one delivery record: triage, the gates, its
	// process span and worker faults, and (its attempter) the attempt
	// and its outcome (handle.go); built by New once the options are
	// applied.
	handler *handler
	signers *signers
	// creds are the endpoints' custom headers and receiver auth
	// (credentials.go); built by New once the attempt client is.
	creds *credentials
	// notices seeds endpoint health across rebalances; noticeFollow
	// feeds it.
	notices      *health.NoticeView
	noticeFollow *hkafka.Follower
	// streaks says which endpoints' transformations are failing
	// (transformstreak.go).
	streaks *transformStreaks
	// answered are the receivers' 2xx answers whose settlement has not
	// committed yet, kept across sessions (answered.go).
	answered *answered
	// mem is the loop's last report of what it holds (memory.go).
	mem memoryReport
	// dumps asks the loop for an account of its lanes, loop is the
	// loop running (nil between sessions): statedump.go.
	dumps stateDumps
	loop  atomic.Pointer[engine]
	// lanes seeds ordered lanes after an assignment; laneFollow feeds it.
	lanes      *lanes.View
	laneFollow *hkafka.Follower
	// readLanes and readEndpoints bring the lanes and the endpoints views
	// up to date (syncLanes; the endpoints store's coalescing barrier,
	// retried: one ListOffsets round serves every partition's resolver
	// waiting then); tests replace them.
	readLanes     func(context.Context) error
	readEndpoints func(context.Context) error

	tp      trace.TracerProvider
	mp      metric.MeterProvider
	metrics instruments
	// probe is the readiness /readyz answers (--health-addr).
	probe *phealth.Probe
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

// WithAttemptOptions passes options to the HTTP attempt client (tests use
// attempt.WithDialContext for an in-memory network).
func WithAttemptOptions(opts ...attempt.Option) Option {
	return func(s *Service) { s.attemptOpts = append(s.attemptOpts, opts...) }
}

// WithBeforeAttempt has fn called with each delivery as its attempt
// begins, on the attempt's goroutine, inside the handling that turns a
// panic into a worker fault: a test injects a worker fault by panicking
// there, exactly where a bug in signing or sending would. Not for
// production use.
func WithBeforeAttempt(fn func(*hooklinev1.Delivery)) Option {
	return func(s *Service) { s.beforeAttempt = fn }
}

// WithSetAside has fn called with each delivery the dispatcher sets
// aside because a record it needs can never be written (produce.go: a
// FAILED result and a dead letter without its payload, no attempt), as
// the decision is made and before the delivery's lane learns of it: a
// test's model of the receivers (make sim) sees the delivery end there,
// which no receiver sees. fn runs on the loop's or an attempt's
// goroutine and must not block. Default none; not for production use.
func WithSetAside(fn func(*hooklinev1.Delivery)) Option {
	return func(s *Service) { s.setAsideHook = fn }
}

// WithRandSeed makes backoff jitter deterministic (default: random seed).
func WithRandSeed(seed uint64) Option {
	return func(s *Service) { s.rand = newLockedRand(seed) }
}

// New validates cfg and returns a Service.
func New(cfg Config, opts ...Option) (*Service, error) {
	guard, err := cfg.Policy()
	if err != nil {
		return nil, fmt.Errorf("dispatcher: %w", err)
	}
	noticeGuard, err := netguard.NewPolicy(cfg.AllowPrivate, cfg.NoticeWebhookCIDRs, nil)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: --notice-webhook-allow-cidrs: %w", err)
	}
	if cfg.TransactionalID == "" {
		host, _ := os.Hostname()
		cfg.TransactionalID = "hookline-dispatcher-" + host
	}
	if cfg.TxnTimeout, err = hkafka.TxnTimeout(cfg.TxnTimeout, cfg.SessionTimeout); err != nil {
		return nil, fmt.Errorf("dispatcher: %w", err)
	}
	if cfg.NoticeWebhookURL != "" {
		if _, err := sign.ParseSecret(cfg.NoticeWebhookSecret); err != nil {
			return nil, fmt.Errorf("dispatcher: --notice-webhook-secret: %w", err)
		}
		if err := checkNoticeURL(cfg.NoticeWebhookURL, noticeGuard.Base()); err != nil {
			return nil, fmt.Errorf("dispatcher: --notice-webhook-url: %w", err)
		}
	}
	egress, err := egressProxy(cfg.EgressProxy)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: --egress-proxy: %w", err)
	}
	tenantEgress, err := tenantEgressProxies(cfg.TenantEgressProxies)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: --tenant-egress-proxy: %w", err)
	}
	if cfg.BatchSize < 1 || cfg.WindowRecords < 1 || cfg.WindowBytes < 1 || cfg.AttemptMemory < attemptOverhead {
		return nil, errors.New("dispatcher: --batch-size, --window-records and --window-bytes must be at least 1, --attempt-memory at least 32768")
	}
	if cfg.MaxInFlight < 1 || cfg.MaxInFlightCeiling < 1 || !(cfg.RateLimit >= 0) || math.IsInf(cfg.RateLimit, 0) || !(cfg.RateLimitCeiling > 0) {
		return nil, errors.New("dispatcher: --max-in-flight and --max-in-flight-ceiling must be at least 1, --rate-limit at least 0, --rate-limit-ceiling above 0")
	}
	if (cfg.RateLimit > 0 && cfg.RateLimit < endpoints.RateLimitFloor) || cfg.RateLimitCeiling < endpoints.RateLimitFloor {
		return nil, fmt.Errorf("dispatcher: --rate-limit (0: none) and --rate-limit-ceiling must be at least %v attempts per second", endpoints.RateLimitFloor)
	}
	if cfg.MaxHold <= 0 || (cfg.Kafka.Retention > 0 && cfg.MaxHold >= cfg.Kafka.Retention) {
		// A hold longer than retention could outlive the records the
		// delivery's history and resend are read from.
		return nil, fmt.Errorf("dispatcher: --max-hold (%v) must be above 0 and below --topic-retention (%v)", cfg.MaxHold, cfg.Kafka.Retention)
	}
	if cfg.EarlyHold < 0 {
		return nil, fmt.Errorf("dispatcher: --early-hold (%v) must be at least 0", cfg.EarlyHold)
	}
	// A delivery held early holds its partition's watermark; one that
	// came due must still have time in its lane before its partition is
	// called stuck.
	cfg.EarlyHold = min(cfg.EarlyHold, cfg.StuckAfter/2)
	keys, err := cfg.Secrets.Keyring()
	if err != nil {
		return nil, fmt.Errorf("dispatcher: %w", err)
	}
	var seed [8]byte
	_, _ = rand.Read(seed[:])
	notices := health.NewNoticeView()
	s := &Service{
		cfg:      cfg,
		log:      slog.Default(),
		now:      time.Now,
		rand:     newLockedRand(binary.LittleEndian.Uint64(seed[:])),
		store:    endpoints.NewStore(),
		topics:   cfg.Kafka.Topics(),
		rcv:      health.New(notices.Lookup, cfg.OutageAfter > 0),
		signers:  newSigners(keys),
		notices:  notices,
		streaks:  newTransformStreaks(),
		answered: newAnswered(answeredBytes),
		lanes:    lanes.NewView(),
		probe:    &phealth.Probe{},
		tp:       otel.GetTracerProvider(),
		mp:       otel.GetMeterProvider(),
	}
	s.readLanes = s.syncLanes
	s.readEndpoints = func(ctx context.Context) error { return s.untilRead(ctx, "endpoints view", s.store.Barrier) }
	for _, o := range opts {
		o(s)
	}
	s.noticeFollow = hkafka.NewFollower(s.notices.Apply, s.topics.Notices)
	s.laneFollow = hkafka.NewFollower(s.lanes.Apply, s.topics.Lanes)
	s.cfg.Kafka.ClientOpts = append(slices.Clip(s.cfg.Kafka.ClientOpts), telemetry.KafkaClientMetrics(s.mp)...)
	common := append([]attempt.Option{attempt.WithClock(s.now), attempt.WithTracerProvider(s.tp)}, egress...)
	client := attempt.New(guard, slices.Concat(common, tenantEgress,
		[]attempt.Option{attempt.WithForwardedTraceContext(cfg.ForwardTraceState, cfg.ForwardBaggage)}, s.attemptOpts)...)
	// The operator's notice webhook has a guard of its own: tenants'
	// allow-lists never reach it, nor its list theirs.
	s.noticeClient = attempt.New(noticeGuard, slices.Concat(common, s.attemptOpts)...)
	if s.metrics, err = newInstruments(s.mp, s.Memory); err != nil {
		return nil, err
	}
	// After the options (WithLogger, WithClock, WithSetAside) and the
	// instruments: the writer holds what they made.
	s.writer = &recordWriter{topics: s.topics, log: s.log, now: s.now, metrics: s.metrics, setAsideHook: s.setAsideHook}
	// The config by pointer: tests change --max-hold, the rechecks and
	// --accept-unsigned-deliveries on s.cfg after New.
	s.holds = &holds{cfg: &s.cfg, keys: s.signers.keys, parked: s.topics.Parked, log: s.log, now: s.now, writer: s.writer}
	s.pauses.store, s.pauses.topic, s.pauses.rcv, s.pauses.log, s.pauses.outcome = s.store, s.topics.Endpoints, s.rcv, s.log, defaultPauseOutcome
	// After the options (WithClock, WithLogger, WithRandSeed,
	// WithTelemetry, WithAttemptOptions, WithBeforeAttempt), the writer
	// and the holds; the config by pointer, as for the holds.
	s.creds = newCredentials(s.signers.keys, client)
	att := &attempter{cfg: &s.cfg, client: client, signers: s.signers, creds: s.creds, answered: s.answered, rcv: s.rcv, holds: s.holds,
		writer: s.writer, streaks: s.streaks, topics: s.topics, metrics: s.metrics, log: s.log, now: s.now, rand: s.rand,
		trackPause: s.pauses.track, beforeAttempt: s.beforeAttempt}
	s.handler = &handler{cfg: &s.cfg, store: s.store, keys: s.signers.keys, rcv: s.rcv, holds: s.holds, writer: s.writer,
		streaks: s.streaks, attempter: att, topics: s.topics, log: s.log, now: s.now, rand: s.rand,
		tracer: s.tp.Tracer(scope), processSpan: "process " + s.topics.Deliveries}
	return s, nil
}

// Probe returns the dispatcher's readiness (served on --health-addr).
func (s *Service) Probe() *phealth.Probe { return s.probe }

// Run dispatches until ctx ends, then drains in-flight attempts (bounded
// by DrainTimeout), commits, and leaves the group. With --health-addr it
// serves /healthz and /readyz until it returns: /readyz answers 503
// "draining" from the moment ctx ends.
func (s *Service) Run(ctx context.Context) (err error) {
	opts, err := s.cfg.Kafka.Opts()
	if err != nil {
		return err
	}
	endHealth, err := phealth.Run(ctx, s.cfg.Health.Addr, s.probe)
	if err != nil {
		return fmt.Errorf("dispatcher: %w", err)
	}
	defer func() { endHealth(err) }()
	if dir := s.cfg.AnswersDir; dir != "" {
		j, read, err := openAnswerJournal(dir)
		if err != nil {
			return fmt.Errorf("dispatcher: --answers-dir: %w", err)
		}
		defer j.close()
		j.onErr = func(err error) {
			s.log.Error("the answers journal stopped writing; answers are kept in memory only until a restart", "dir", dir, "err", err)
		}
		s.answered.attach(j, read)
		n, _ := s.answered.size()
		s.log.Info("answers journal opened", "dir", dir, "read", len(read), "held", n)
	}
	began := time.Now()
	if err := s.cfg.Kafka.Ensure(ctx, s.cfg.Kafka.Specs()); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return fmt.Errorf("dispatcher: %w", err)
	}
	ensured := time.Since(began)
	// The parts of a running dispatcher, in their start order; they stop
	// in the reverse one (platform/supervise): the loop first, whose
	// drain still reads the views, then the pruner and the notifier,
	// then the views; the endpoints view, the health server and the
	// answers journal (deferred) outlive them all. A view that fails
	// stops dispatching: without the endpoints view the dispatcher could
	// sign with a stale secret or miss a pause.
	g := supervise.New(ctx)
	// The notices view: endpoint health that outlives this process; the
	// lanes view: ordered lanes' members outside memory. Both are read
	// in the background from now on.
	g.Go(supervise.Part{Name: "dispatcher: notices", Run: func(ctx context.Context) error { return s.noticeFollow.Run(ctx, s.cfg.Kafka) }})
	g.Go(supervise.Part{Name: "dispatcher: lanes", Run: func(ctx context.Context) error { return s.laneFollow.Run(ctx, s.cfg.Kafka) }})
	// The first session's start (rejoin.go: its fence, and what the
	// group still assigns this instance) runs beside the endpoints
	// view's first read: a restarted dispatcher's partitions wait for
	// both (a static member's since its predecessor began to drain), and
	// neither needs the other. Later sessions start themselves (consume).
	startCtx, stopStart := context.WithCancel(g.Context())
	var first *sessionStart
	started := make(chan error, 1)
	go func() {
		var err error
		first, err = s.startSession(startCtx)
		started <- err
	}()
	stopStore, err := s.store.StartWatched(g.Context(), s.cfg.Kafka, func(err error) { g.Stop(fmt.Errorf("dispatcher: endpoints: %w", err)) })
	if err != nil {
		stopStart()
		if err := <-started; err != nil {
			s.log.Debug("the session's start ended with the endpoints view's failure", "err", err)
		}
		// Stopped while starting (nil), a view's failure, or this one.
		g.Stop(fmt.Errorf("dispatcher: endpoints: %w", err))
		return g.Wait()
	}
	defer stopStore()
	viewRead := time.Since(began)
	err = <-started
	stopStart()
	if err != nil {
		g.Stop(fmt.Errorf("dispatcher: %w", err))
		return g.Wait()
	}
	s.log.Info("dispatcher started", "topics_ensured_in", ensured, "endpoints_read_in", viewRead, "session_started_in", time.Since(began))

	if s.cfg.NoticeWebhookURL != "" {
		n, err := notify.New(s.cfg.Kafka, s.cfg.Group+"-notifier", s.cfg.NoticeWebhookURL, s.cfg.NoticeWebhookSecret, s.noticeClient, s.log, s.rand)
		if err != nil {
			g.Stop(err)
			return g.Wait()
		}
		g.Go(supervise.Part{Name: "dispatcher: notifier", Run: n.Run})
	}
	g.Go(supervise.Part{Name: "dispatcher: prune", Run: func(ctx context.Context) error {
		s.runPrune(ctx)
		return nil
	}})
	s.probe.Started()
	// A commit whose end failed with its outcome unknown ends the
	// session, not the process: a new one, after a backoff, starts from
	// what Kafka committed (hkafka.Resume; docs/DESIGN.md I40).
	g.Go(supervise.Part{Name: "dispatcher", Run: func(ctx context.Context) error {
		return hkafka.Resume(ctx, s.log, "dispatcher", func(ctx context.Context) error {
			start := first // above, beside the endpoints view's read
			first = nil
			return s.consume(ctx, opts, start)
		})
	}})
	err = g.Wait()
	s.pauses.wg.Wait() // automatic pauses' outcome watchers end with the loop
	return err
}

// consume dispatches the deliveries topic in one transactional session
// until ctx ends or the session fails. It begins from the state a freshly
// started process has (freshSession) and returns only once every
// goroutine it started has returned (the loop's end, the automatic
// pauses' outcome watchers), so that nothing of one session runs on into
// the next (docs/DESIGN.md I40). start is the session's start when Run
// made it (the first session's); consume makes it when nil.
func (s *Service) consume(ctx context.Context, opts []kgo.Opt, start *sessionStart) error {
	s.freshSession()
	ctx, endSession := context.WithCancel(ctx)
	defer func() {
		endSession()
		s.pauses.wg.Wait()
	}()
	e := s.newEngine()
	lag, err := telemetry.NewLag(s.mp, s.cfg.Group)
	if err != nil {
		return fmt.Errorf("dispatcher: metrics: %w", err)
	}
	defer lag.Close()
	e.lag = lag
	// Compression and linger as ingest's producer (--kafka-compression:
	// none by default; a commit flushes, so linger does not delay it).
	popts, err := s.cfg.Kafka.ProducerOpts()
	if err != nil {
		return fmt.Errorf("dispatcher: %w", err)
	}
	// An earlier instance killed mid-commit left its transaction open,
	// and nothing behind it in the partitions it wrote to (results,
	// retries, deliveries) is readable until it ends: end it now, not
	// after the rebalance or the transaction timeout (rejoin.go).
	if start == nil {
		if start, err = s.startSession(ctx); err != nil {
			if ctx.Err() != nil {
				return nil // stopped while starting
			}
			return fmt.Errorf("dispatcher: %w", err)
		}
	}
	if len(start.owned) > 0 {
		e.y.synced.askBack(start.owned, start.gen) // rejoin.go
		s.log.Info("rejoining as a static member: the join asks for the partitions the group still assigns this instance", "partitions", start.owned, "generation", start.gen)
	}
	if id := s.cfg.GroupInstanceID; id != "" {
		opts = append(slices.Clip(opts), kgo.InstanceID(id)) // static membership (config.go)
	}
	sess, err := kgo.NewGroupTransactSession(append(append(opts, popts...),
		kgo.TransactionalID(s.cfg.TransactionalID),
		kgo.TransactionTimeout(s.cfg.TxnTimeout),
		kgo.SessionTimeout(s.cfg.SessionTimeout),
		kgo.HeartbeatInterval(max(s.cfg.SessionTimeout/10, 100*time.Millisecond)),
		kgo.ConsumerGroup(s.cfg.Group),
		kgo.ConsumeTopics(s.topics.Deliveries),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(s.cfg.FetchMaxWait),
		kgo.ProducerBatchMaxBytes(hkafka.MaxRecordBytes),
		// A rebalance waits for the loop, which first commits what the
		// partitions it moves away completed (yield.go).
		kgo.Balancers(e.y.synced),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsCallbackBlocked(func(context.Context, *kgo.Client) { e.y.callbackBlocked() }),
		kgo.OnPartitionsAssigned(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
			defer e.y.callbackRan()
			id, _ := cl.GroupMetadata()
			e.member.Assigned(id) // hkafka.Membership: checked by the loop and each commit
			if ps := m[s.topics.Deliveries]; len(ps) > 0 {
				s.log.Info("partitions assigned", "partitions", ps)
			}
			s.seedAssigned(ctx, cl, e, m) // assigned.go
			s.probe.Assigned(m)
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			defer e.y.callbackRan()
			if ps := m[s.topics.Deliveries]; len(ps) > 0 {
				s.log.Info("partitions revoked", "partitions", ps)
			}
			s.probe.Revoked(m)
			e.dropped(m)
			s.dropHealth(m)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, cl *kgo.Client, m map[string][]int32) {
			defer e.y.callbackRan()
			_, gen := cl.GroupMetadata()
			e.y.synced.askBack(m[s.topics.Deliveries], gen)
			s.log.Info("the group session ended with its partitions lost; the next join asks for them back", "partitions", m[s.topics.Deliveries], "generation", gen)
			s.probe.Lost()
			e.member.Lost()
			e.dropped(m)
			s.dropHealth(m)
		}),
	)...)
	if err != nil {
		return fmt.Errorf("dispatcher: kafka session: %w", err)
	}
	// Leaving the group waits for the polls the loop has not allowed
	// (kgo.BlockRebalanceOnPoll): they are over once the loop returned.
	defer sess.CloseAllowingRebalance()
	s.probe.CheckLag(kadm.NewClient(sess.Client()), s.cfg.Group, s.topics.Deliveries)
	s.log.Info("dispatcher consuming", "topic", s.topics.Deliveries, "group", s.cfg.Group)
	return s.dispatch(ctx, sess, e)
}

// freshSession gives a session the state a freshly started process has
// (docs/DESIGN.md I40): what an earlier session derived from its own
// work, which its failed end may or may not have committed, is dropped:
// endpoint health (seeded again from the notices view), the automatic
// pauses not settled yet, the unwritable marks, the abort counts. The
// followers of committed topics (the endpoints, lanes and notices views)
// and what belongs to the process stay. Called when no goroutine of an
// earlier session runs.
func (s *Service) freshSession() {
	s.rcv.Reset()
	s.pauses.reset()
	s.writer.unwritable.Reset()
	s.aborts = hkafka.Backoff{}
}

// reseedTimeout bounds how long a partition assignment waits for the
// notices view (it is health, not order: seeded from what the view holds
// when the wait ends).
const reseedTimeout = 10 * time.Second

// lockedRand is a seeded PCG source safe for concurrent use.
type lockedRand struct {
	mu sync.Mutex
	r  *mrand.Rand
}

func newLockedRand(seed uint64) *lockedRand {
	return &lockedRand{r: mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (l *lockedRand) Int64N(n int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Int64N(n)
}

// reseedHealth, on a partition assignment, waits until the notices view
// holds every notice committed so far (the previous owners' included),
// then has the health of the endpoints of the newly assigned partitions
// seeded from it again. Endpoints of partitions this dispatcher kept keep
// their health, probes in flight included.
//
// The wait is bounded (reseedTimeout): a rebalance callback that never
// returned would leave the new partitions unconsumed.
func (s *Service) reseedHealth(ctx context.Context, assigned map[string][]int32) {
	ctx, cancel := context.WithTimeout(ctx, reseedTimeout)
	defer cancel()
	if err := s.noticeFollow.Sync(ctx, s.topics.Notices); err != nil {
		s.log.Warn("notices view not caught up; endpoint health seeded from what it holds", "err", err)
	}
	// The lanes view is not read here: no record of a partition is
	// placed before a read of it begun after the assignment succeeded,
	// retried for as long as it takes (resolve.go).
	s.dropHealth(assigned)
}

// dropHealth forgets the health of the endpoints of the deliveries
// topic's partitions in m (see health.Receivers.Forget).
func (s *Service) dropHealth(m map[string][]int32) {
	parts := map[int32]bool{}
	for _, p := range m[s.topics.Deliveries] {
		parts[p] = true
	}
	if len(parts) > 0 {
		s.rcv.Forget(parts)
	}
}

// pruneEvery is how often state kept per endpoint outside the loop
// (health, the notices view, metric series) is pruned of deleted
// endpoints.
const pruneEvery = 5 * time.Minute

// pruneState forgets what the dispatcher keeps per endpoint for the
// endpoints that no longer exist: their health, their entry in the
// notices view, their in-flight metric series (the lanes are pruned by
// the loop).
func (s *Service) pruneState() {
	gone := func(id string) bool { return s.store.Get(id) == nil }
	s.rcv.Prune(gone)
	s.notices.Prune(gone)
	s.streaks.prune(gone)
	s.metrics.inFlight.prune(gone)
}

// runPrune prunes every pruneEvery until ctx ends.
func (s *Service) runPrune(ctx context.Context) {
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.pruneState()
		}
	}
}
