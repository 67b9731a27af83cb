// Package scheduler owns every retry timer, and keeps them all in Kafka.
// It consumes the retries topic and the delay-tier topics; each record is
// released to the deliveries topic when due, or moved to the largest tier
// that fits the time left. A tier partition whose head is not due yet is
// paused until it is: the poll loop never sleeps and never releases
// early. Every hop (consume, produce, commit) is one Kafka transaction, so
// a crash neither loses a timer nor duplicates one.
//
// Memory does not grow with the number of pending timers: they are
// records in Kafka, and the scheduler holds one timer per paused
// partition.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/services/scheduler/tier"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

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

	mu     sync.Mutex
	paused map[tp]*time.Timer
	cl     *kgo.Client
}

type tp struct {
	topic     string
	partition int32
}

// Option configures a Service.
type Option func(*Service)

// WithClock injects the clock (default time.Now). Pause timers use the
// runtime's timers, so a test clock must advance with them (testing/synctest).
func WithClock(now func() time.Time) Option { return func(s *Service) { s.now = now } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *Service) { s.log = l } }

// WithReleaseHook calls fn for every delivery released, with the release
// time, after its transaction commits; for measurements.
func WithReleaseHook(fn func(d *hooklinev1.Delivery, at time.Time)) Option {
	return func(s *Service) { s.onRelease = fn }
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
		paused: map[tp]*time.Timer{},
	}
	for _, d := range ts {
		name := s.topics.DelayPrefix + tier.Name(d)
		s.tierOf[name] = d
		s.byTier[d] = name
	}
	for _, o := range opts {
		o(s)
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

// Run schedules until ctx ends, then finishes the batch in hand, commits
// it and leaves the group.
func (s *Service) Run(ctx context.Context) error {
	opts, err := s.cfg.Kafka.Opts()
	if err != nil {
		return err
	}
	if err := s.ensureTopics(ctx, opts); err != nil {
		return err
	}
	consume := append([]string{s.topics.Retries}, s.Topics()...)
	sess, err := kgo.NewGroupTransactSession(append(opts,
		kgo.TransactionalID(s.cfg.TransactionalID),
		kgo.TransactionTimeout(s.cfg.TxnTimeout),
		kgo.ConsumerGroup(s.cfg.Group),
		kgo.ConsumeTopics(consume...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(s.cfg.FetchMaxWait),
		kgo.ProducerBatchMaxBytes(hkafka.MaxRecordBytes),
		// A revoked or lost partition's pause and timer must go with it:
		// a pause survives a rebalance, and a partition re-assigned later
		// would otherwise stay paused for good.
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { s.forget(m) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { s.forget(m) }),
	)...)
	if err != nil {
		return fmt.Errorf("scheduler: kafka session: %w", err)
	}
	s.mu.Lock()
	s.cl = sess.Client()
	s.mu.Unlock()
	defer func() {
		s.forgetAll()
		sess.Close()
	}()
	s.log.Info("scheduler consuming", "topics", consume, "group", s.cfg.Group)

	for {
		fs := sess.PollRecords(ctx, s.cfg.BatchSize)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return nil
		}
		fs.EachError(func(t string, p int32, err error) {
			s.log.Warn("fetch error", "topic", t, "partition", p, "err", err)
		})
		if fs.NumRecords() == 0 {
			continue
		}
		if err := s.hop(ctx, sess, fs); err != nil {
			return err
		}
	}
}

func (s *Service) ensureTopics(ctx context.Context, opts []kgo.Opt) error {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("scheduler: kafka client: %w", err)
	}
	defer cl.Close()
	specs := s.cfg.Kafka.Specs()
	for _, name := range s.Topics() {
		specs = append(specs, s.cfg.Kafka.DelaySpec(name))
	}
	if err := s.cfg.Kafka.EnsureTopics(ctx, kadm.NewClient(cl), specs); err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	return nil
}

// hop moves every due record of one poll one step (released, or into a
// tier) in one transaction. In each partition it stops at the first record
// not due yet: the partition is rewound to that record and paused until
// its hold time, so nothing after it is committed.
func (s *Service) hop(ctx context.Context, sess *kgo.GroupTransactSession, fs kgo.Fetches) error {
	if err := sess.Begin(); err != nil {
		return fmt.Errorf("scheduler: begin transaction: %w", err)
	}
	endCtx := context.WithoutCancel(ctx)
	now := s.now()
	var (
		out    []*kgo.Record
		rel    []*hooklinev1.Delivery
		rewind = map[string]map[int32]kgo.EpochOffset{}
		holds  = map[tp]time.Time{}
	)
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		for _, r := range p.Records {
			rec, hold, d := s.step(r, now)
			if !hold.IsZero() {
				if rewind[p.Topic] == nil {
					rewind[p.Topic] = map[int32]kgo.EpochOffset{}
				}
				rewind[p.Topic][p.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset}
				holds[tp{p.Topic, p.Partition}] = hold
				return
			}
			out = append(out, rec)
			if d != nil {
				rel = append(rel, d)
			}
		}
	})
	if len(rewind) > 0 {
		// Rewinding sets the offset the transaction commits for these
		// partitions to their first not-yet-due record.
		sess.Client().SetOffsets(rewind)
		for k, h := range holds {
			s.pauseUntil(k, h)
		}
	}

	var (
		pmu  sync.Mutex
		perr error
	)
	for _, r := range out {
		sess.Produce(endCtx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				pmu.Lock()
				perr = errors.Join(perr, err)
				pmu.Unlock()
			}
		})
	}
	if err := sess.Client().Flush(endCtx); err != nil {
		return fmt.Errorf("scheduler: flush: %w", err)
	}
	end := kgo.TryCommit
	if perr != nil {
		end = kgo.TryAbort
	}
	committed, err := sess.End(endCtx, end)
	if err != nil {
		return fmt.Errorf("scheduler: end transaction: %w", err)
	}
	if !committed {
		// Nothing of this hop is visible; the session rewound to the
		// committed offsets. Drop the pauses so every partition is read
		// again from there and re-evaluated.
		s.log.Warn("hop not committed; its records will be read again", "records", len(out), "produce_err", perr)
		s.forgetAll()
		return nil
	}
	if s.onRelease != nil {
		at := s.now()
		for _, r := range rel {
			s.onRelease(r, at)
		}
	}
	return nil
}

// step decides one record's next hop at now. It returns the record to
// produce, or a non-zero hold when the record must wait longer in its
// partition; d is set when the record is a release.
func (s *Service) step(r *kgo.Record, now time.Time) (out *kgo.Record, hold time.Time, d *hooklinev1.Delivery) {
	var del hooklinev1.Delivery
	if err := hkafka.Decode(r, &del); err != nil || del.GetDeliveryId() == "" {
		reason := "not a Delivery"
		if err != nil {
			reason = err.Error()
		}
		s.log.Error("undecodable timer record copied to the dead-letter topic", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "reason", reason)
		dead := s.copyTo(r, s.topics.Dead, now)
		dead.Headers = append(dead.Headers, kgo.RecordHeader{Key: headerPoison, Value: []byte(reason)})
		return dead, time.Time{}, nil
	}
	due := now
	if del.GetDueAt() != nil {
		due = del.GetDueAt().AsTime()
	}
	if delay, inTier := s.tierOf[r.Topic]; inTier {
		if h := tier.Hold(delay, r.Timestamp, due); h.After(now) {
			return nil, h, nil
		}
	}
	dec := s.tiers.Route(now, due)
	if dec.Release {
		return s.copyTo(r, s.topics.Deliveries, now), time.Time{}, &del
	}
	return s.copyTo(r, s.byTier[dec.Tier], now), time.Time{}, nil
}

// copyTo returns r for topic, unchanged but for its timestamp: the bytes
// of the delivery pass through, headers (trace context) included.
func (s *Service) copyTo(r *kgo.Record, topic string, now time.Time) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: now}
}

// pauseUntil pauses a partition and resumes it at hold.
func (s *Service) pauseUntil(k tp, hold time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.paused[k]; ok {
		t.Stop()
	}
	s.cl.PauseFetchPartitions(map[string][]int32{k.topic: {k.partition}})
	s.paused[k] = time.AfterFunc(hold.Sub(s.now()), func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.paused, k)
		s.cl.ResumeFetchPartitions(map[string][]int32{k.topic: {k.partition}})
	})
}

// forget drops the pauses and timers of partitions this instance no
// longer owns.
func (s *Service) forget(m map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for topic, parts := range m {
		for _, p := range parts {
			if t, ok := s.paused[tp{topic, p}]; ok {
				t.Stop()
				delete(s.paused, tp{topic, p})
			}
		}
	}
	if s.cl != nil {
		s.cl.ResumeFetchPartitions(m)
	}
}

func (s *Service) forgetAll() {
	s.mu.Lock()
	m := map[string][]int32{}
	for k := range s.paused {
		m[k.topic] = append(m[k.topic], k.partition)
	}
	s.mu.Unlock()
	s.forget(m)
}
