// Package dispatcher is the only part of Hookline that talks HTTP to
// receivers. It consumes the deliveries topic, makes one signed attempt
// per delivery, classifies the outcome, and writes the attempt's result,
// and the delivery's retry, dead letter or parked copy, in one Kafka
// transaction with the consumed offsets: a crash re-attempts (receivers
// deduplicate on webhook-id) but never writes a Kafka record twice.
package dispatcher

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/hookline/hookline/platform/endpoints"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/netguard"
	"github.com/hookline/hookline/services/dispatcher/attempt"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
)

// Service is one dispatcher instance.
type Service struct {
	cfg    Config
	log    *slog.Logger
	now    func() time.Time
	rand   *lockedRand
	store  *endpoints.Store
	client *attempt.Client
	topics hkafka.Topics

	attemptOpts []attempt.Option
	retries     metric.Int64Counter
	deferrals   metric.Int64Counter
	rcv         *receivers
}

// lane is one consuming loop: the fast lane reads the deliveries topic;
// the slow lane reads the deliveries of endpoints that answer slowly.
type lane struct {
	slow  bool
	topic string
	group string
	txnID string
}

// Option configures a Service.
type Option func(*Service)

// WithClock injects the clock (default time.Now).
func WithClock(now func() time.Time) Option { return func(s *Service) { s.now = now } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *Service) { s.log = l } }

// WithAttemptOptions passes options to the HTTP attempt client (tests use
// attempt.WithDialContext for an in-memory network).
func WithAttemptOptions(opts ...attempt.Option) Option {
	return func(s *Service) { s.attemptOpts = append(s.attemptOpts, opts...) }
}

// WithRandSeed makes backoff jitter deterministic (default: random seed).
func WithRandSeed(seed uint64) Option {
	return func(s *Service) { s.rand = newLockedRand(seed) }
}

// New validates cfg and returns a Service.
func New(cfg Config, opts ...Option) (*Service, error) {
	guard, err := netguard.New(cfg.AllowPrivate, cfg.AllowCIDRs)
	if err != nil {
		return nil, err
	}
	if cfg.TransactionalID == "" {
		host, _ := os.Hostname()
		cfg.TransactionalID = "hookline-dispatcher-" + host
	}
	if cfg.Workers < 1 || cfg.BatchSize < 1 {
		return nil, errors.New("dispatcher: --workers and --batch-size must be at least 1")
	}
	var seed [8]byte
	_, _ = rand.Read(seed[:])
	s := &Service{
		cfg:    cfg,
		log:    slog.Default(),
		now:    time.Now,
		rand:   newLockedRand(binary.LittleEndian.Uint64(seed[:])),
		store:  endpoints.NewStore(),
		topics: cfg.Kafka.Topics(),
		rcv:    newReceivers(),
	}
	for _, o := range opts {
		o(s)
	}
	s.client = attempt.New(guard, append([]attempt.Option{attempt.WithClock(s.now)}, s.attemptOpts...)...)
	s.retries, err = otel.Meter("github.com/hookline/hookline/services/dispatcher").Int64Counter("hookline.dispatcher.retries",
		metric.WithDescription("Retries scheduled after a transient failure, by attempt number of the failed attempt."))
	if err != nil {
		return nil, fmt.Errorf("dispatcher: metrics: %w", err)
	}
	s.deferrals, err = otel.Meter("github.com/hookline/hookline/services/dispatcher").Int64Counter("hookline.dispatcher.deferrals",
		metric.WithDescription("Deliveries deferred without an attempt, by reason: concurrency cap, rate limit, endpoint paused, slow lane."))
	if err != nil {
		return nil, fmt.Errorf("dispatcher: metrics: %w", err)
	}
	return s, nil
}

// Run dispatches until ctx ends, then drains in-flight attempts (bounded
// by DrainTimeout), commits, and leaves the group.
func (s *Service) Run(ctx context.Context) error {
	opts, err := s.cfg.Kafka.Opts()
	if err != nil {
		return err
	}
	if err := s.ensureTopics(ctx, opts); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return err
	}
	stopStore, storeFailed, err := s.store.Start(ctx, s.cfg.Kafka)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("dispatcher: endpoints: %w", err)
	}
	defer stopStore()
	// The endpoints view failing stops dispatching: without it the
	// dispatcher could sign with a stale secret or miss a pause.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case err := <-storeFailed:
			cancel(fmt.Errorf("dispatcher: endpoints: %w", err))
		case <-ctx.Done():
		}
	}()

	lanes := []lane{{topic: s.topics.Deliveries, group: s.cfg.Group, txnID: s.cfg.TransactionalID}}
	if s.cfg.SlowAfter > 0 {
		lanes = append(lanes, lane{slow: true, topic: s.topics.SlowDeliveries, group: s.cfg.Group + "-slow", txnID: s.cfg.TransactionalID + "-slow"})
	}
	// The lanes run side by side; the first to fail stops the other.
	var (
		wg   sync.WaitGroup
		once sync.Once
		ferr error
	)
	for _, l := range lanes {
		wg.Go(func() {
			if err := s.runLane(ctx, opts, l); err != nil {
				once.Do(func() { ferr = err })
				cancel(err)
			}
		})
	}
	wg.Wait()
	if ferr != nil {
		return ferr
	}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// runLane consumes one lane's topic in batches until ctx ends.
func (s *Service) runLane(ctx context.Context, opts []kgo.Opt, l lane) error {
	sess, err := kgo.NewGroupTransactSession(append(opts,
		kgo.TransactionalID(l.txnID),
		kgo.TransactionTimeout(s.cfg.TxnTimeout),
		kgo.ConsumerGroup(l.group),
		kgo.ConsumeTopics(l.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ProducerBatchMaxBytes(hkafka.MaxRecordBytes),
	)...)
	if err != nil {
		return fmt.Errorf("dispatcher: kafka session: %w", err)
	}
	defer sess.Close()
	s.log.Info("dispatcher consuming", "topic", l.topic, "group", l.group)

	for {
		fs := sess.PollRecords(ctx, s.cfg.BatchSize)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return nil
		}
		fs.EachError(func(t string, p int32, err error) {
			s.log.Warn("fetch error", "topic", t, "partition", p, "err", err)
		})
		var recs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
		if len(recs) == 0 {
			continue
		}
		if err := s.dispatchBatch(ctx, sess, l, recs); err != nil {
			return err
		}
	}
}

func (s *Service) ensureTopics(ctx context.Context, opts []kgo.Opt) error {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("dispatcher: kafka client: %w", err)
	}
	defer cl.Close()
	if err := s.cfg.Kafka.EnsureTopics(ctx, kadm.NewClient(cl), s.cfg.Kafka.Specs()); err != nil {
		return fmt.Errorf("dispatcher: %w", err)
	}
	return nil
}

// dispatchBatch attempts every record of one poll concurrently, then
// writes all outputs and the consumed offsets in one transaction. Attempts
// run on a context that survives shutdown for DrainTimeout, so a stop
// finishes what it started instead of re-attempting it after restart.
func (s *Service) dispatchBatch(ctx context.Context, sess *kgo.GroupTransactSession, l lane, recs []*kgo.Record) error {
	work, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(s.cfg.DrainTimeout, cancel)
		<-work.Done()
		t.Stop()
	})
	defer stop()

	if err := sess.Begin(); err != nil {
		return fmt.Errorf("dispatcher: begin transaction: %w", err)
	}
	endCtx := context.WithoutCancel(ctx)

	outs := make([][]*kgo.Record, len(recs))
	sem := make(chan struct{}, s.cfg.Workers)
	var wg sync.WaitGroup
	for i, r := range recs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			outs[i] = s.handleSafely(work, l, r)
		})
	}
	wg.Wait()
	if work.Err() != nil {
		// The drain deadline passed: abort, so every delivery of this
		// batch goes back as it was (R-CLASS-3) and is attempted again
		// after the restart.
		if _, err := sess.End(endCtx, kgo.TryAbort); err != nil {
			return fmt.Errorf("dispatcher: abort transaction: %w", err)
		}
		return nil
	}

	var (
		pmu  sync.Mutex
		perr error
	)
	for _, out := range outs {
		for _, r := range out {
			sess.Produce(endCtx, r, func(_ *kgo.Record, err error) {
				if err != nil {
					pmu.Lock()
					perr = errors.Join(perr, err)
					pmu.Unlock()
				}
			})
		}
	}
	if err := sess.Client().Flush(endCtx); err != nil {
		return fmt.Errorf("dispatcher: flush: %w", err)
	}
	end := kgo.TryCommit
	if perr != nil {
		end = kgo.TryAbort
	}
	committed, err := sess.End(endCtx, end)
	if err != nil {
		return fmt.Errorf("dispatcher: end transaction: %w", err)
	}
	if !committed {
		// A rebalance took the partitions or a produce failed: nothing of
		// this batch is visible and its offsets are not committed, so the
		// partitions' owner attempts these deliveries again.
		s.log.Warn("batch not committed; its deliveries will be attempted again", "records", len(recs), "produce_err", perr)
	}
	return nil
}

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
