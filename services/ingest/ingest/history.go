package ingest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"time"

	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/services/ingest/history"
)

// sweepEvery is how often entries older than the topics' retention are
// deleted from the history index.
const sweepEvery = time.Minute

// openHistory opens the history index under --data-dir and makes the
// follower that feeds it, resuming at the offsets the index stored.
func (s *Service) openHistory() (*history.Store, error) {
	hist, err := history.Open(s.cfg.DataDir, history.Topics{Deliveries: s.topics.Deliveries, Results: s.topics.Results, Dead: s.topics.Dead},
		history.WithCacheBytes(s.cfg.HistoryCache), history.WithLogger(s.log))
	if err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	from, err := hist.Offsets()
	if err != nil {
		_ = hist.Close()
		return nil, fmt.Errorf("ingest: %w", err)
	}
	var resumed int64
	for _, ps := range from {
		for _, o := range ps {
			resumed += o
		}
	}
	began := time.Now()
	warmed, err := hist.Warm()
	if err != nil {
		_ = hist.Close()
		return nil, fmt.Errorf("ingest: history: warm the index: %w", err)
	}
	s.log.Info("history index open", "dir", hist.Dir(), "resume_after_records", resumed, "tables_warmed", warmed, "warm_took", time.Since(began))
	s.history = hist.Reader()
	s.indexFollow = hkafka.NewBatchFollower(hist.Writer().Apply, from, s.topics.Deliveries, s.topics.Results, s.topics.Dead)
	return hist, nil
}

// sweepHistory deletes what the topics no longer hold from the index,
// at start and every sweepEvery, until ctx ends: deliveries and events
// older than --topic-retention, dead-lettered ones (and their events)
// older than --topic-hold-retention.
func (s *Service) sweepHistory(ctx context.Context, index *history.Writer) {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		now := s.now()
		if d, e, err := index.Sweep(now.Add(-s.cfg.Kafka.Retention), now.Add(-max(s.cfg.Kafka.Retention, s.cfg.Kafka.HoldRetention))); err != nil {
			s.log.Warn("history: retention sweep", "err", err)
		} else if d+e > 0 {
			s.log.Info("history: retention sweep", "deliveries", d, "events", e)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pageTokenKey is --page-token-secret or, unset, a key derived from the
// API key entries, which every replica of a deployment shares. It signs
// page tokens only: a token is bound to its tenant and query, so whoever
// can make one gains only a cursor into a list its key may read anyway.
// Console sessions never use it (--console-session-key-file).
func pageTokenKey(cfg Config) []byte {
	if cfg.PageTokenSecret != "" {
		return []byte(cfg.PageTokenSecret)
	}
	sum := sha256.Sum256([]byte("hookline page tokens\x00" + strings.Join(cfg.APIKeys, ",")))
	return sum[:]
}
