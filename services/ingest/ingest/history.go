package ingest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/hookline/hookline/platform/endpoints"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/services/ingest/history"
	"github.com/hookline/hookline/services/ingest/pagetoken"
)

// sweepEvery is how often entries older than the topics' retention are
// deleted from the history index.
const sweepEvery = time.Minute

// deliveryHistory reads the delivery history that DeliveryService and
// the console answer from: the history index under --data-dir, fed by
// its follower of the deliveries, results and dead-letter topics, swept
// of what the topics no longer hold; the searches and lookups on it;
// and the redeliveries of a recover, read from it. It holds the index
// and its follower (set by openHistory, in Run, before it serves), the
// flags they are opened and swept with, the endpoints view, the page
// tokens, admission and the producer a recover writes through, the
// logger and the clock; nothing else.
type deliveryHistory struct {
	// dataDir is --data-dir; cacheBytes is --history-cache-bytes.
	dataDir    string
	cacheBytes int64
	topics     hkafka.Topics
	// retention is --topic-retention; holdRetention is
	// --topic-hold-retention.
	retention, holdRetention time.Duration
	// recoverMaxWindow is --recover-max-window; recoverMaxDeliveries is
	// --recover-max-deliveries.
	recoverMaxWindow     time.Duration
	recoverMaxDeliveries int
	store                *endpoints.Store
	tokens               *pagetoken.Codec
	admission            *admission
	kafka                *kafkaProducer
	log                  *slog.Logger
	now                  func() time.Time

	// history serves DeliveryService and the console; writer applies
	// what indexFollow reads and sweeps what retention removed. All are
	// set by Run (openHistory) before it serves.
	history     *history.Reader
	writer      *history.Writer
	indexFollow *hkafka.Follower
}

// openHistory opens the history index under --data-dir and makes the
// follower that feeds it, resuming at the offsets the index stored.
func (dh *deliveryHistory) openHistory() (*history.Store, error) {
	hist, err := history.Open(dh.dataDir, history.Topics{Deliveries: dh.topics.Deliveries, Results: dh.topics.Results, Dead: dh.topics.Dead},
		history.WithCacheBytes(dh.cacheBytes), history.WithLogger(dh.log))
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
	dh.log.Info("history index open", "dir", hist.Dir(), "resume_after_records", resumed, "tables_warmed", warmed, "warm_took", time.Since(began))
	dh.history, dh.writer = hist.Reader(), hist.Writer()
	dh.indexFollow = hkafka.NewBatchFollower(dh.writer.Apply, from, dh.topics.Deliveries, dh.topics.Results, dh.topics.Dead)
	return hist, nil
}

// sweepHistory deletes what the topics no longer hold from the index,
// at start and every sweepEvery, until ctx ends: deliveries and events
// older than --topic-retention, dead-lettered ones (and their events)
// older than --topic-hold-retention.
func (dh *deliveryHistory) sweepHistory(ctx context.Context) {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		now := dh.now()
		if d, e, err := dh.writer.Sweep(now.Add(-dh.retention), now.Add(-max(dh.retention, dh.holdRetention))); err != nil {
			dh.log.Warn("history: retention sweep", "err", err)
		} else if d+e > 0 {
			dh.log.Info("history: retention sweep", "deliveries", d, "events", e)
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
