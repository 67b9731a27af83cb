package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/hookline/hookline/bench/harness"
)

// stack is one Hookline of a scenario: replicas of each service as
// separate processes on one topic prefix, and the tenant's API key.
type stack struct {
	prefix  string
	brokers string
	apiKey  string
	ingest  []string          // gRPC addresses, one per ingest replica
	procs   []*harness.Proc   // in start order: schedulers, dispatchers, ingests
	health  map[string]string // process name → its --health-addr (dispatchers, schedulers)
	dataDir string            // removed on close (hookline dev)
}

// startStack starts replicas of bin/scheduler, bin/dispatcher and
// bin/ingest on prefix and waits until every ingest is SERVING.
func startStack(ctx context.Context, cfg config, name, brokers string, replicas int, shape loadShape) (*stack, error) {
	prefix := fmt.Sprintf("chaos%d-%s.", time.Now().Unix(), name)
	key, entry, err := harness.NewAPIKey(ctx, filepath.Join(cfg.BinDir, "hookline"), "chaos")
	if err != nil {
		return nil, err
	}
	s := &stack{prefix: prefix, brokers: brokers, apiKey: key, health: map[string]string{}}
	healthAddr := func(name string) ([]string, error) {
		port, err := harness.FreePort()
		if err != nil {
			return nil, err
		}
		s.health[name] = "127.0.0.1:" + strconv.Itoa(port)
		return []string{"--health-addr", s.health[name]}, nil
	}
	common := []string{"--kafka-brokers", brokers, "--topic-prefix", prefix, "--log-level", "warn", "--topic-partitions", "6"}
	if cfg.ReplicationFactor > 0 {
		common = append(common, "--topic-replication-factor", strconv.Itoa(cfg.ReplicationFactor))
	}
	logDir := filepath.Join(cfg.LogDir, name)
	keyFile, err := harness.SecretsKeyFile(logDir, "secrets.keys")
	if err != nil {
		return nil, err
	}
	secrets := []string{"--secrets-key-file", keyFile}
	for i := range replicas {
		id, name := fmt.Sprintf("%sscheduler-%d", prefix, i), fmt.Sprintf("scheduler-%d", i)
		ha, err := healthAddr(name)
		if err != nil {
			return nil, err
		}
		s.procs = append(s.procs, newProc(logDir, "scheduler", name, filepath.Join(cfg.BinDir, "scheduler"),
			slices.Concat(common, ha, []string{"--group", prefix + "scheduler", "--transactional-id", id})...))
	}
	for i := range replicas {
		id, name := fmt.Sprintf("%sdispatcher-%d", prefix, i), fmt.Sprintf("dispatcher-%d", i)
		ha, err := healthAddr(name)
		if err != nil {
			return nil, err
		}
		s.procs = append(s.procs, newProc(logDir, "dispatcher", name, filepath.Join(cfg.BinDir, "dispatcher"),
			slices.Concat(common, secrets, ha, []string{"--group", prefix + "dispatcher", "--transactional-id", id, "--allow-private-destinations"}, shape.dispatchArgs)...))
	}
	for i := range replicas {
		port, err := harness.FreePort()
		if err != nil {
			return nil, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		s.ingest = append(s.ingest, addr)
		s.procs = append(s.procs, newProc(logDir, "ingest", fmt.Sprintf("ingest-%d", i), filepath.Join(cfg.BinDir, "ingest"),
			slices.Concat(common, secrets, []string{"--grpc-addr", addr, "--api-keys", entry, "--allow-http", "--allow-private-destinations"}, shape.ingestArgs)...))
	}
	for _, p := range s.procs {
		if err := p.Start(); err != nil {
			s.close()
			return nil, err
		}
	}
	for _, addr := range s.ingest {
		if err := harness.WaitServing(ctx, addr, 2*time.Minute, s.procs...); err != nil {
			s.close()
			return nil, fmt.Errorf("ingest %s: %w (logs in %s)", addr, err, logDir)
		}
	}
	return s, nil
}

// startDev starts one `hookline dev` (ingest, dispatcher, scheduler and
// kfake persisted to a fresh data directory) and waits until it serves.
func startDev(ctx context.Context, cfg config, name string) (*stack, error) {
	d, err := harness.NewDev(filepath.Join(cfg.LogDir, name), "dev", filepath.Join(cfg.BinDir, "hookline"), "chaos")
	if err != nil {
		return nil, err
	}
	s := &stack{prefix: "hookline.", brokers: d.KafkaAddr, apiKey: d.APIKey, ingest: []string{d.GRPCAddr}, dataDir: d.DataDir,
		procs: []*harness.Proc{d.Proc}}
	if err := s.procs[0].Start(); err != nil {
		s.close()
		return nil, err
	}
	if err := harness.WaitServing(ctx, s.ingest[0], 2*time.Minute, s.procs...); err != nil {
		s.close()
		return nil, fmt.Errorf("hookline dev: %w", err)
	}
	return s, nil
}

func (s *stack) brokersOrEmpty() string {
	if s == nil {
		return ""
	}
	return s.brokers
}

// find returns the i-th process of kind.
func (s *stack) find(kind string, i int) *harness.Proc {
	for _, p := range s.procs {
		if p.Kind == kind {
			if i == 0 {
				return p
			}
			i--
		}
	}
	return nil
}

// peakMiB returns the largest resident memory any process of kind had.
func (s *stack) peakMiB(kind string) float64 {
	var kib int64
	for _, p := range s.procs {
		if p.Kind == kind {
			kib = max(kib, p.Mem().PeakKiB())
		}
	}
	return float64(kib) / 1024
}

// newProc prepares one service process of kind.
func newProc(logDir, kind, name, bin string, args ...string) *harness.Proc {
	p := harness.NewProc(logDir, name, bin, nil, args...)
	p.Kind = kind
	return p
}

// close stops ingest first, then the dispatchers, then the schedulers.
func (s *stack) close() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		s.procs[i].Stop(15 * time.Second)
	}
	if s.dataDir != "" {
		_ = os.RemoveAll(s.dataDir)
	}
}
