// Package scheduler owns every retry timer, and keeps them all in Kafka.
// It consumes the retries topic and the delay-tier topics; each record is
// released to the deliveries topic when due, or moved to the largest tier
// that fits the time left. A tier partition whose head is not due yet is
// paused until it is: the poll loop never sleeps and never releases
// early; when a held head comes due the loop is woken and releases it
// from memory, without waiting for a fetch. Every hop (consume, produce, commit) is one Kafka transaction, so
// a crash neither loses a timer nor duplicates one.
//
// Memory does not grow with the number of pending timers: they are
// records in Kafka. The scheduler holds, per paused partition, one timer
// and the records of one poll from its head on.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/batchrec"
	"github.com/hookline/hookline/platform/endpoints"
	"github.com/hookline/hookline/platform/health"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/lanes"
	"github.com/hookline/hookline/platform/supervise"
	"github.com/hookline/hookline/platform/telemetry"
	"github.com/hookline/hookline/sdk/ids"
	"github.com/hookline/hookline/services/scheduler/tier"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

const scope = "github.com/hookline/hookline/services/scheduler"

// headerPoison marks a record copied raw to the dead-letter topic because
// it does not decode as a Delivery.
const headerPoison = "hookline-poison"

// Service is one scheduler instance.
type Service struct {
	cfg    Config
	log    *slog.Logger
	now    func() time.Time
	tiers  tier.Tiers
	topics hkafka.Topics
	// tierOf maps a delay topic to its delay; byTier the reverse.
	tierOf map[string]time.Duration
	byTier map[time.Duration]string

	onRelease func(d *hooklinev1.Delivery, at time.Time)
	// setAsideHook, if set, learns of each delivery set aside (tests).
	setAsideHook func(*hooklinev1.Delivery)

	tp       trace.TracerProvider
	mp       metric.MeterProvider
	tracer   trace.Tracer
	lateness metric.Float64Histogram
	// releaseSpan names the span of a release.
	releaseSpan string
	// probe is the readiness /readyz answers (--health-addr).
	probe *health.Probe

	// mu guards held and wake; partition callbacks and timers run on
	// other goroutines than the poll loop.
	mu   sync.Mutex
	held map[tp]*heldPartition
	wake context.CancelFunc
	cl   *kgo.Client

	// parked is the scheduler's side of the parked topic (parkedview.go);
	// store is the endpoints view that says which parked deliveries may
	// go; markers the plain producer of its sync markers (the poll loop
	// only).
	parked  *parkedView
	store   *endpoints.Store
	markers *kgo.Client

	// unwritable are deliveries a broker refused a release (or tier
	// move) of: set aside when they come again. aborts counts aborted
	// hops in a row per partition, and backoff waits after one
	// (hkafka.Backoff; the poll loop only).
	unwritable hkafka.Unwritables
	aborts     hkafka.Backoff
	backoff    func(context.Context, time.Duration)
}

type tp struct {
	topic     string
	partition int32
}

// heldPartition is a paused tier partition whose head is not due yet:
// the head and the records polled after it, in offset order (at most one
// poll's worth), and when the head is due to be looked at again.
type heldPartition struct {
	recs  []*kgo.Record
	hold  time.Time
	timer *time.Timer
}

// Option configures a Service.
type Option func(*Service)

// WithClock injects the clock (default time.Now). Pause timers use the
// runtime's timers, so a test clock must advance with them (testing/synctest).
func WithClock(now func() time.Time) Option { return func(s *Service) { s.now = now } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *Service) { s.log = l } }

// WithTelemetry sets the tracer and meter providers (default: the global
// ones, no-op unless a program installed others).
func WithTelemetry(tp trace.TracerProvider, mp metric.MeterProvider) Option {
	return func(s *Service) { s.tp, s.mp = tp, mp }
}

// WithReleaseHook calls fn for every delivery released, with the release
// time, after its transaction commits; for measurements.
func WithReleaseHook(fn func(d *hooklinev1.Delivery, at time.Time)) Option {
	return func(s *Service) { s.onRelease = fn }
}

// WithSetAside has fn called with each delivery the scheduler sets
// aside because its next hop's record can never be written (FAILED, a
// dead letter), as the decision is made: a test's model of the
// receivers (make sim) sees the delivery end there. fn runs on the poll
// loop and must not block. Default none; not for production use.
func WithSetAside(fn func(*hooklinev1.Delivery)) Option {
	return func(s *Service) { s.setAsideHook = fn }
}

// New validates cfg and returns a Service.
func New(cfg Config, opts ...Option) (*Service, error) {
	ts, err := tier.Parse(cfg.Tiers)
	if err != nil {
		return nil, err
	}
	if cfg.TransactionalID == "" {
		host, _ := os.Hostname()
		cfg.TransactionalID = "hookline-scheduler-" + host
	}
	if cfg.TxnTimeout, err = hkafka.TxnTimeout(cfg.TxnTimeout, cfg.SessionTimeout); err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	if cfg.MaxParked < 1 {
		return nil, errors.New("scheduler: --max-parked must be at least 1")
	}
	if cfg.BatchSize < 1 {
		return nil, errors.New("scheduler: --batch-size must be at least 1")
	}
	s := &Service{
		cfg:    cfg,
		log:    slog.Default(),
		now:    time.Now,
		tiers:  ts,
		topics: cfg.Kafka.Topics(),
		tierOf: map[string]time.Duration{},
		byTier: map[time.Duration]string{},
		held:   map[tp]*heldPartition{},
		store:  endpoints.NewStore(),
		probe:  &health.Probe{},
		backoff: func(ctx context.Context, d time.Duration) {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-ctx.Done():
			case <-t.C:
			}
		},
		tp: otel.GetTracerProvider(),
		mp: otel.GetMeterProvider(),
	}
	for _, d := range ts {
		name := s.topics.DelayPrefix + tier.Name(d)
		s.tierOf[name] = d
		s.byTier[d] = name
	}
	for _, o := range opts {
		o(s)
	}
	s.tracer = s.tp.Tracer(scope)
	s.releaseSpan = "release " + s.topics.Deliveries
	s.cfg.Kafka.ClientOpts = append(slices.Clip(s.cfg.Kafka.ClientOpts), telemetry.KafkaClientMetrics(s.mp)...)
	s.lateness, err = s.mp.Meter(scope).Float64Histogram("hookline.scheduler.release.lateness", metric.WithUnit("s"),
		metric.WithDescription("How long after its due time a delivery was released to the deliveries topic."),
		metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
	if err != nil {
		return nil, fmt.Errorf("scheduler: metrics: %w", err)
	}
	overflow, err := s.mp.Meter(scope).Int64Counter("hookline.scheduler.parked.overflow",
		metric.WithDescription("Parked deliveries over --max-parked sent back to the recheck path (the retries topic)."))
	if err != nil {
		return nil, fmt.Errorf("scheduler: metrics: %w", err)
	}
	s.parked = &parkedView{
		topics: s.topics, txnID: s.cfg.TransactionalID, recheck: s.cfg.ParkRecheck, max: s.cfg.MaxParked,
		log: s.log, store: s.store, overflow: overflow, unwritable: &s.unwritable, setAside: s.setAside, wake: s.wakeLoop,
		idx: newParkedIndex(),
	}
	return s, nil
}

// Topics returns the delay-tier topics in ascending order of delay.
func (s *Service) Topics() []string {
	out := make([]string, 0, len(s.tiers))
	for _, d := range s.tiers {
		out = append(out, s.byTier[d])
	}
	return out
}

// Probe returns the scheduler's readiness (served on --health-addr).
func (s *Service) Probe() *health.Probe { return s.probe }

// Run schedules until ctx ends, then finishes the batch in hand, commits
// it and leaves the group. With --health-addr it serves /healthz and
// /readyz until it returns: /readyz answers 503 "draining" from the
// moment ctx ends.
func (s *Service) Run(ctx context.Context) (err error) {
	opts, err := s.cfg.Kafka.Opts()
	if err != nil {
		return err
	}
	endHealth, err := health.Run(ctx, s.cfg.Health.Addr, s.probe)
	if err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	defer func() { endHealth(err) }()
	if err := s.ensureTopics(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return err
	}
	// The endpoints view says which parked deliveries may go; Start
	// returns once it has read every endpoint record committed before.
	// It outlives the loop (deferred), and its failure stops the loop
	// (platform/supervise).
	g := supervise.New(ctx)
	stopStore, err := s.store.StartWatched(g.Context(), s.cfg.Kafka, func(err error) { g.Stop(fmt.Errorf("scheduler: endpoints: %w", err)) })
	if err != nil {
		g.Stop(fmt.Errorf("scheduler: endpoints: %w", err)) // nil when stopped while starting
		return g.Wait()
	}
	defer stopStore()
	// The lanes view says which members parked behind a blocked head may
	// go (lanes.ParkedBehindHeader); until it has read the topic they
	// only expire.
	laneView := lanes.NewView()
	laneFollow := hkafka.NewFollower(laneView.Apply, s.topics.Lanes)
	g.Go(supervise.Part{Name: "scheduler: lanes", Run: func(ctx context.Context) error { return laneFollow.Run(ctx, s.cfg.Kafka) }})
	g.Go(supervise.Part{Name: "scheduler: lanes sync", Run: func(ctx context.Context) error {
		s.parked.syncLanes(ctx, laneFollow, laneView)
		<-ctx.Done()
		return nil
	}})
	lag, err := telemetry.NewLag(s.mp, s.cfg.Group)
	if err != nil {
		g.Stop(fmt.Errorf("scheduler: metrics: %w", err))
		return g.Wait()
	}
	defer lag.Close()
	// A hop whose end failed with its outcome unknown ends the session,
	// not the process: a new one, after a backoff, starts from what
	// Kafka committed (hkafka.Resume; docs/DESIGN.md I40).
	g.Go(supervise.Part{Name: "scheduler", Run: func(ctx context.Context) error {
		return hkafka.Resume(ctx, s.log, "scheduler", func(ctx context.Context) error { return s.consume(ctx, opts, lag) })
	}})
	return g.Wait()
}

// consume runs one transactional session until ctx ends or a hop fails.
// It begins from the state a freshly started process has: the held
// partitions and their timers went with the last session (forgetAll),
// and the unwritable marks and abort counts, which that session derived
// from its own hops, are dropped here (docs/DESIGN.md I40).
func (s *Service) consume(ctx context.Context, opts []kgo.Opt, lag *telemetry.Lag) error {
	s.unwritable.Reset()
	s.aborts = hkafka.Backoff{}
	// An earlier instance killed mid-hop (or this one's session whose
	// last end failed) left its transaction open, and nothing behind its
	// releases in the deliveries partitions is readable until it ends:
	// end it now, not after the rebalance.
	if err := s.cfg.Kafka.Fence(ctx, s.cfg.TransactionalID, s.cfg.TxnTimeout); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return fmt.Errorf("scheduler: %w", err)
	}
	// The member id the session's partitions were assigned under: an
	// expelled member that joined again as a new one ends the session,
	// and no hop commits under it (hkafka.Membership).
	member := &hkafka.Membership{}
	sess, err := s.newSession(opts, lag, member)
	if err != nil {
		return err
	}
	// Closed on every way out, from here: a session that joined and was
	// never closed stays a member, heartbeating and holding partitions it
	// never polls (docs/DESIGN.md I46).
	defer func() {
		s.forgetAll()
		sess.Close()
	}()
	s.mu.Lock()
	s.cl = sess.Client()
	s.mu.Unlock()
	s.parked.startSession(time.Now().UnixNano()) // its index rebuilt from the log on assignment
	// The parked topic's sync markers go through a plain producer, not
	// the session's transactions (parkedSync).
	s.markers, err = kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("scheduler: kafka client: %w", err)
	}
	defer s.markers.Close()
	// Read until it answers: a session begins while a broker is down (a
	// new one after a hop whose end's outcome was unknown), and its
	// first metadata read failing ended the process (make chaos
	// kill-broker).
	adm := kadm.NewClient(sess.Client())
	if err := hkafka.Until(ctx, s.log, nil, "parked topic metadata", hkafka.DefaultSyncTimeout, func(ctx context.Context) error {
		return s.parked.partitions(ctx, adm)
	}); err != nil {
		return nil // ctx ended: stopped
	}
	s.log.Info("scheduler consuming", "topics", s.consumed(), "group", s.cfg.Group)
	s.probe.CheckLag(adm, s.cfg.Group, s.consumed()...)
	s.probe.Started()

	for {
		// A held head coming due cancels the poll, so releases never wait
		// for a fetch: lateness does not depend on FetchMaxWait.
		// Anything parked (or a partition catching up) wakes the loop
		// every parkedTick, so that a resume the endpoints view has read
		// is acted on without waiting for a fetch; an assignment of a
		// parked partition wakes it at once (parkedAdjust), for its
		// marker.
		pollCtx, wake := context.WithCancel(ctx)
		tick := s.parked.pending()
		if tick {
			var cancelTick context.CancelFunc
			pollCtx, cancelTick = context.WithTimeout(pollCtx, parkedTick)
			inner := wake
			wake = func() { cancelTick(); inner() }
		}
		s.mu.Lock()
		s.wake = wake
		due := s.anyDueLocked(s.now())
		s.mu.Unlock()
		var fs kgo.Fetches
		if !due {
			token := s.probe.PollBegins()
			fs = sess.PollRecords(pollCtx, s.cfg.BatchSize)
			s.probe.PollEnded(token)
		}
		wake()
		if ctx.Err() != nil || fs.IsClientClosed() {
			return nil
		}
		lag.Observe(fs)
		fs.EachError(func(t string, p int32, err error) {
			// A poll ended by the loop's own wake (canceled) or by the
			// parked tick (deadline) is not a fetch error.
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				s.log.Warn("fetch error", "topic", t, "partition", p, "err", err)
			}
		})
		if err := member.CheckClient(sess.Client()); err != nil {
			return err // what it holds (held heads, parked index) may be another member's
		}
		if err := s.hop(member.Guard(ctx), sess, fs); err != nil {
			return err
		}
	}
}

// consumed returns the topics the scheduler consumes.
func (s *Service) consumed() []string {
	return append([]string{s.topics.Retries, s.topics.Parked}, s.Topics()...)
}

// newSession returns the scheduler's transactional group session.
func (s *Service) newSession(opts []kgo.Opt, lag *telemetry.Lag, member *hkafka.Membership) (*kgo.GroupTransactSession, error) {
	// Compression as every producer's (--kafka-compression, none by
	// default); a hop flushes, so linger does not delay it.
	popts, err := s.cfg.Kafka.ProducerOpts()
	if err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	sess, err := kgo.NewGroupTransactSession(append(append(opts, popts...),
		kgo.TransactionalID(s.cfg.TransactionalID),
		kgo.TransactionTimeout(s.cfg.TxnTimeout),
		kgo.SessionTimeout(s.cfg.SessionTimeout),
		kgo.HeartbeatInterval(max(s.cfg.SessionTimeout/10, 100*time.Millisecond)),
		kgo.ConsumerGroup(s.cfg.Group),
		kgo.ConsumeTopics(s.consumed()...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(s.cfg.FetchMaxWait),
		// Bound what one fetch buffers: held partitions keep copies of
		// at most one poll, and nothing else is kept between hops.
		kgo.FetchMaxBytes(16<<20),
		kgo.FetchMaxPartitionBytes(1<<20),
		kgo.ProducerBatchMaxBytes(hkafka.MaxRecordBytes),
		// A revoked or lost partition's pause and timer must go with it:
		// a pause survives a rebalance, and a partition re-assigned later
		// would otherwise stay paused for good.
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, m map[string][]int32) {
			id, _ := cl.GroupMetadata()
			member.Assigned(id)
			s.probe.Assigned(m)
		}),
		// The parked partitions are always read from their start (their
		// committed offsets never matter): the index is the log's.
		kgo.AdjustFetchOffsetsFn(s.parked.adjust),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			s.probe.Revoked(m)
			s.forget(m)
			s.parked.forget(m)
			lag.Forget(m)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			s.probe.Lost()
			member.Lost()
			s.forget(m)
			s.parked.forget(m)
			lag.Forget(m)
		}),
	)...)
	if err != nil {
		return nil, fmt.Errorf("scheduler: kafka session: %w", err)
	}
	return sess, nil
}

func (s *Service) ensureTopics(ctx context.Context) error {
	specs := s.cfg.Kafka.Specs()
	for _, name := range s.Topics() {
		specs = append(specs, s.cfg.Kafka.DelaySpec(name))
	}
	if err := s.cfg.Kafka.Ensure(ctx, specs); err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	return nil
}

// hop moves every due record, held or just polled, one step (released,
// or into a tier) in one transaction. In each partition it stops at the
// first record not due yet: that record and the ones polled after it are
// held in memory, the partition is paused and its committed offset stays
// at the held head until it moves.
func (s *Service) hop(ctx context.Context, sess *kgo.GroupTransactSession, fs kgo.Fetches) error {
	now := s.now()
	type work struct {
		k    tp
		recs []*kgo.Record
	}
	var todo []work
	s.mu.Lock()
	for k, h := range s.held {
		if !h.hold.After(now) {
			h.timer.Stop()
			delete(s.held, k)
			todo = append(todo, work{k, h.recs})
		}
	}
	s.mu.Unlock()
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		switch {
		case len(p.Records) == 0:
		case p.Topic == s.topics.Parked:
			s.parked.apply(p) // never a tier: indexed, released below
		default:
			todo = append(todo, work{tp{p.Topic, p.Partition}, p.Records})
		}
	})
	if len(todo) == 0 && !s.parked.busy() {
		return nil
	}

	var (
		out     []*kgo.Record
		rel     []release
		offsets = map[string]map[int32]kgo.EpochOffset{}
		resume  = map[string][]int32{}
		hold    = map[tp]*heldPartition{}
	)
	setOffset := func(k tp, r *kgo.Record, next int64) {
		if offsets[k.topic] == nil {
			offsets[k.topic] = map[int32]kgo.EpochOffset{}
		}
		offsets[k.topic][k.partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: next}
	}
	parts := make([]hkafka.TopicPartition, 0, len(todo))
	for _, w := range todo {
		parts = append(parts, hkafka.TopicPartition{Topic: w.k.topic, Partition: w.k.partition})
		stopped := false
		for i, r := range w.recs {
			recs, h, d := s.step(r, now)
			if !h.IsZero() {
				// Commit up to, not past, the head that must wait.
				setOffset(w.k, r, r.Offset)
				hold[w.k] = &heldPartition{recs: detach(w.recs[i:]), hold: h}
				stopped = true
				break
			}
			out = append(out, recs...)
			if d != nil {
				rel = append(rel, release{d, recs[0]})
			}
		}
		if !stopped {
			last := w.recs[len(w.recs)-1]
			setOffset(w.k, last, last.Offset+1)
			resume[w.k.topic] = append(resume[w.k.topic], w.k.partition)
		}
	}
	cl := sess.Client()
	// Pause before anything else can fetch past a held head; resume the
	// partitions whose held records all moved.
	for k := range hold {
		cl.PauseFetchPartitions(map[string][]int32{k.topic: {k.partition}})
	}
	cl.SetOffsets(offsets)
	// The parked share, decided once the hop's offsets are set: whether
	// its End will commit any offset (and so be checked against the
	// group's generation) decides whether it may release.
	ph := s.parked.work(now, len(cl.UncommittedOffsets()) > 0)
	s.parked.sync(ctx, s.markers, ph)
	out = append(out, ph.out...)
	rel = append(rel, ph.rel...)
	if len(out) == 0 {
		// Every record stays held: nothing to write, no offset moves, so
		// no transaction (an empty one costs a broker round trip, and
		// kgo may stall a commit that carries no offsets).
		for k, h := range hold {
			s.holdUntil(k, h)
		}
		return nil
	}

	var (
		fmu    sync.Mutex
		failed []hkafka.Refused
	)
	committed, perr, err := hkafka.TransactEach(ctx, sess, s.cfg.TxnTimeout, out, nil, func(r *kgo.Record, err error) {
		fmu.Lock()
		failed = append(failed, hkafka.Refused{R: r, Err: err})
		fmu.Unlock()
	})
	if err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	s.parked.done(ph, committed)
	if !committed {
		// Nothing of this hop is visible and the session rewound to the
		// committed offsets: drop every hold and read it all again —
		// after a backoff, and with the deliveries whose records a
		// broker refused marked, so they are set aside when they come
		// again instead of aborting every hop (hkafka.Blame).
		reason, blamed := hkafka.Blame(failed, s.deliveryOf)
		for id, why := range blamed {
			s.unwritable.Mark(id, why, now)
		}
		wait, n := s.aborts.Aborted(parts, reason)
		log := s.log.Warn
		if reason != hkafka.AbortTransient {
			log = s.log.Error
		}
		log("hop not committed; its records will be read again after a backoff", "reason", reason, "records", len(out),
			"aborts_in_a_row", n, "backoff", wait, "produce_err", perr)
		defer s.backoff(ctx, wait)
		s.forgetAll()
		// forgetAll resumes what s.held names; the partitions this hop
		// paused (new holds) or took out of s.held (holds that came due)
		// are not there, and would stay paused with no timer.
		touched := map[string][]int32{}
		for _, w := range todo {
			touched[w.k.topic] = append(touched[w.k.topic], w.k.partition)
		}
		cl.ResumeFetchPartitions(touched)
		s.parked.rewind(cl)
		return nil
	}
	s.aborts.Committed(parts)
	cl.ResumeFetchPartitions(resume)
	for k, h := range hold {
		s.holdUntil(k, h)
	}
	s.released(ctx, rel)
	return nil
}

// deliveryOf returns the id of the delivery a record the scheduler
// produces is about ("" for a raw copy that does not decode).
func (s *Service) deliveryOf(r *kgo.Record) string {
	switch r.Topic {
	case s.topics.Results:
		var ar hooklinev1.AttemptResult
		if hkafka.Decode(r, &ar) == nil {
			return ar.GetDeliveryId()
		}
	case s.topics.Dead:
		var dl hooklinev1.DeadLetter
		if hkafka.Decode(r, &dl) == nil && dl.GetDelivery().GetDeliveryId() != "" {
			return dl.GetDelivery().GetDeliveryId()
		}
	default: // a release or a tier move: the delivery itself
		var d hooklinev1.Delivery
		if hkafka.Decode(r, &d) == nil {
			return d.GetDeliveryId()
		}
	}
	return ""
}

// setAside ends d FAILED because its next hop's record can never be
// written (why): a result and a dead letter without the payload (ingest's
// history keeps the payload, so it can still be resent) take its place.
// A member of an ordered lane (it carries its lane_seq) will then never
// come back to the lane that waits for it outside: a release command on
// the deliveries topic, keyed like its deliveries so that it reaches the
// lane's owner in log order, tells that dispatcher to stop waiting
// (LANE_OP_RELEASE; the dispatcher's lanecmd.go).
func (s *Service) setAside(d *hooklinev1.Delivery, why string, now time.Time) []*kgo.Record {
	s.log.Error("timer's record cannot be written to Kafka; dead-lettered without its payload",
		"delivery_id", d.GetDeliveryId(), "endpoint_id", d.GetEndpointId(), "attempt", d.GetAttempt(), "why", why)
	if s.setAsideHook != nil {
		s.setAsideHook(d)
	}
	res := &hooklinev1.AttemptResult{
		DeliveryId: d.GetDeliveryId(), EventId: d.GetEventId(), TenantId: d.GetTenantId(), EndpointId: d.GetEndpointId(),
		EventType: d.GetEventType(), Attempt: d.GetAttempt(), StartedAt: timestamppb.New(now),
		State:  hooklinev1.DeliveryState_DELIVERY_STATE_FAILED,
		Reason: "its release cannot be written to Kafka (" + why + "); dead-lettered without its payload",
	}
	small := proto.Clone(d).(*hooklinev1.Delivery)
	small.Payload = nil
	// A batch's members each get their result and dead letter
	// (platform/batchrec): none is left without a terminal result.
	var out []*kgo.Record
	add := func(topic string, m proto.Message) {
		r, err := hkafka.Record(topic, d.GetEndpointId(), m)
		if err != nil {
			panic(err) // a message the scheduler built: a bug
		}
		r.Timestamp = now
		out = append(out, r)
	}
	for _, r := range batchrec.Results(small, res) {
		add(s.topics.Results, r)
	}
	for _, dl := range batchrec.DeadLetters(small, res, now) {
		add(s.topics.Dead, dl)
	}
	if d.LaneSeq != nil {
		cmd := &hooklinev1.Delivery{
			DeliveryId: d.GetDeliveryId(), EventId: d.GetEventId(), TenantId: d.GetTenantId(), EndpointId: d.GetEndpointId(),
			EventType: d.GetEventType(), CreatedAt: timestamppb.New(now), OrderingKey: d.GetOrderingKey(),
			Kind:        hooklinev1.DeliveryKind_DELIVERY_KIND_LANE_COMMAND,
			LaneCommand: &hooklinev1.LaneCommand{Op: hooklinev1.LaneOp_LANE_OP_RELEASE, CommandId: ids.New(ids.LaneCommand, now), At: timestamppb.New(now)},
		}
		r, err := hkafka.Record(s.topics.Deliveries, d.GetEndpointId(), cmd)
		if err != nil {
			panic(err) // a message the scheduler built: a bug
		}
		out = append(out, r)
	}
	return out
}

// release is a delivery released to the deliveries topic in a hop.
type release struct {
	d   *hooklinev1.Delivery
	rec *kgo.Record
}

// released reports a committed hop's releases: the lateness histogram,
// and a span per delivery in its trace, from its due time to its
// release, so a trace shows the wait between attempts and how late the
// scheduler was.
func (s *Service) released(ctx context.Context, rel []release) {
	at := s.now()
	for _, r := range rel {
		due := at
		if r.d.GetDueAt() != nil {
			due = r.d.GetDueAt().AsTime()
		}
		late := max(at.Sub(due), 0)
		s.lateness.Record(ctx, late.Seconds())
		_, span := s.tracer.Start(telemetry.RecordContext(ctx, r.rec), s.releaseSpan, trace.WithTimestamp(due))
		if span.IsRecording() {
			span.SetAttributes(
				attribute.String("hookline.event_id", r.d.GetEventId()),
				attribute.String("hookline.delivery_id", r.d.GetDeliveryId()),
				attribute.String("hookline.endpoint_id", r.d.GetEndpointId()),
				attribute.Int("hookline.attempt", int(r.d.GetAttempt())),
				attribute.String("hookline.delivery.kind", r.d.GetKind().String()),
				attribute.Float64("hookline.scheduler.lateness_ms", float64(late.Microseconds())/1000),
			)
		}
		span.End(trace.WithTimestamp(at))
		if s.onRelease != nil {
			s.onRelease(r.d, at)
		}
	}
}

// step decides one record's next hop at now. It returns the records to
// produce, or a non-zero hold when the record must wait longer in its
// partition; d is set when the record is a release (then the first
// record). A hop whose record is over hkafka.RecordLimit, or was refused
// by a broker before (unwritable), is set aside instead (setAside).
func (s *Service) step(r *kgo.Record, now time.Time) (outs []*kgo.Record, hold time.Time, d *hooklinev1.Delivery) {
	out, hold, del, release := s.next(r, now)
	switch {
	case out == nil:
		return nil, hold, nil
	case del == nil: // an undecodable record's raw copy
		return []*kgo.Record{out}, hold, nil
	}
	why := hkafka.OverLimit(out)
	if why == "" {
		why = s.unwritable.Reason(del.GetDeliveryId())
	}
	switch {
	case why != "":
		return s.setAside(del, why, now), time.Time{}, nil
	case release:
		return []*kgo.Record{out}, time.Time{}, del
	}
	return []*kgo.Record{out}, time.Time{}, nil
}

// next decides one record's next hop at now, as step does, before the
// hop's record is sized: the record to produce (nil when it must wait
// until hold), the delivery it carries (nil for an undecodable record,
// copied raw to the dead-letter topic), and whether it is a release.
func (s *Service) next(r *kgo.Record, now time.Time) (out *kgo.Record, hold time.Time, d *hooklinev1.Delivery, release bool) {
	var del hooklinev1.Delivery
	if err := hkafka.Decode(r, &del); err != nil || del.GetDeliveryId() == "" {
		reason := "not a Delivery"
		if err != nil {
			reason = err.Error()
		}
		s.log.Error("undecodable timer record copied to the dead-letter topic", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "reason", reason)
		dead := s.copyTo(r, s.topics.Dead, now)
		dead.Headers = append(dead.Headers, kgo.RecordHeader{Key: headerPoison, Value: []byte(reason)})
		return dead, time.Time{}, nil, false
	}
	due := now
	if del.GetDueAt() != nil {
		due = del.GetDueAt().AsTime()
	}
	if delay, inTier := s.tierOf[r.Topic]; inTier {
		if h := tier.Hold(delay, r.Timestamp, due); h.After(now) {
			return nil, h, nil, false
		}
	}
	dec := s.tiers.Route(now, due)
	switch {
	case dec.Release:
		return s.copyTo(r, s.topics.Deliveries, now), time.Time{}, &del, true
	case dec.InPlace:
		// Due sooner than the smallest tier: another hop could only
		// add lateness, so wait here, held in memory.
		return nil, due, nil, false
	}
	return s.copyTo(r, s.byTier[dec.Tier], now), time.Time{}, &del, false
}

// copyTo returns r for topic, unchanged but for its timestamp: the bytes
// of the delivery pass through, headers (trace context) included.
func (s *Service) copyTo(r *kgo.Record, topic string, now time.Time) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: now}
}

// detach copies records out of the fetch buffers they point into, so a
// held partition pins only its own records' bytes, not whole fetches.
func detach(recs []*kgo.Record) []*kgo.Record {
	if len(recs) > 0 && recs[0].Context == detached {
		return recs // held before: already copies
	}
	out := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		c := &kgo.Record{
			Key:         append([]byte(nil), r.Key...),
			Value:       append([]byte(nil), r.Value...),
			Timestamp:   r.Timestamp,
			Topic:       r.Topic,
			Partition:   r.Partition,
			LeaderEpoch: r.LeaderEpoch,
			Offset:      r.Offset,
			Context:     detached,
		}
		for _, h := range r.Headers {
			c.Headers = append(c.Headers, kgo.RecordHeader{Key: h.Key, Value: append([]byte(nil), h.Value...)})
		}
		out[i] = c
	}
	return out
}

// detached marks records copied by detach.
var detached = context.WithValue(context.Background(), detachedKey{}, true)

type detachedKey struct{}

// holdUntil keeps h for partition k (already paused) and wakes the poll
// loop when its head is due.
func (s *Service) holdUntil(k tp, h *heldPartition) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.held[k]; ok {
		old.timer.Stop()
	}
	h.timer = time.AfterFunc(h.hold.Sub(s.now()), func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.wake != nil {
			s.wake()
		}
	})
	s.held[k] = h
}

func (s *Service) anyDueLocked(now time.Time) bool {
	for _, h := range s.held {
		if !h.hold.After(now) {
			return true
		}
	}
	return false
}

// forget drops what is held for partitions this instance no longer owns,
// and clears their pauses: a pause survives a rebalance, and a partition
// assigned back later would otherwise stay paused for good.
func (s *Service) forget(m map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for topic, parts := range m {
		for _, p := range parts {
			if h, ok := s.held[tp{topic, p}]; ok {
				h.timer.Stop()
				delete(s.held, tp{topic, p})
			}
		}
	}
	if s.cl != nil {
		s.cl.ResumeFetchPartitions(m)
	}
}

// wakeLoop ends the poll loop's wait (a parked partition was assigned:
// its marker is to be written).
func (s *Service) wakeLoop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wake != nil {
		s.wake()
	}
}

// forgetAll drops every hold and pause: after an aborted hop the session
// has rewound to the committed offsets, which are the held heads or
// earlier, so everything held will be fetched again.
func (s *Service) forgetAll() {
	s.mu.Lock()
	m := map[string][]int32{}
	for k := range s.held {
		m[k.topic] = append(m[k.topic], k.partition)
	}
	s.mu.Unlock()
	s.forget(m)
}
