package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// stack is one Hookline of a scenario: replicas of each service as
// separate processes on one topic prefix, and the tenant's API key.
type stack struct {
	prefix  string
	brokers string
	apiKey  string
	ingest  []string // gRPC addresses, one per ingest replica
	procs   []*proc  // in start order: schedulers, dispatchers, ingests
	dataDir string   // removed on close (hookline dev)
}

// startStack starts replicas of bin/scheduler, bin/dispatcher and
// bin/ingest on prefix and waits until every ingest is SERVING.
func startStack(ctx context.Context, cfg config, name, brokers string, replicas int) (*stack, error) {
	prefix := fmt.Sprintf("chaos%d-%s.", time.Now().Unix(), name)
	key, entry, err := newAPIKey(ctx, filepath.Join(cfg.BinDir, "hookline"))
	if err != nil {
		return nil, err
	}
	s := &stack{prefix: prefix, brokers: brokers, apiKey: key}
	common := []string{"--kafka-brokers", brokers, "--topic-prefix", prefix, "--log-level", "warn", "--topic-partitions", "6"}
	if cfg.ReplicationFactor > 0 {
		common = append(common, "--topic-replication-factor", strconv.Itoa(cfg.ReplicationFactor))
	}
	logDir := filepath.Join(cfg.LogDir, name)
	for i := range replicas {
		id := fmt.Sprintf("%sscheduler-%d", prefix, i)
		s.procs = append(s.procs, newProc(logDir, "scheduler", fmt.Sprintf("scheduler-%d", i), filepath.Join(cfg.BinDir, "scheduler"),
			slices.Concat(common, []string{"--group", prefix + "scheduler", "--transactional-id", id})...))
	}
	for i := range replicas {
		id := fmt.Sprintf("%sdispatcher-%d", prefix, i)
		s.procs = append(s.procs, newProc(logDir, "dispatcher", fmt.Sprintf("dispatcher-%d", i), filepath.Join(cfg.BinDir, "dispatcher"),
			slices.Concat(common, []string{"--group", prefix + "dispatcher", "--transactional-id", id, "--allow-private-destinations"})...))
	}
	for i := range replicas {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		s.ingest = append(s.ingest, addr)
		s.procs = append(s.procs, newProc(logDir, "ingest", fmt.Sprintf("ingest-%d", i), filepath.Join(cfg.BinDir, "ingest"),
			slices.Concat(common, []string{"--grpc-addr", addr, "--api-keys", entry, "--allow-http", "--allow-private-destinations"})...))
	}
	for _, p := range s.procs {
		if err := p.run(); err != nil {
			s.close()
			return nil, err
		}
	}
	for _, addr := range s.ingest {
		if err := waitServing(ctx, addr, 2*time.Minute); err != nil {
			s.close()
			return nil, fmt.Errorf("ingest %s: %w (logs in %s)", addr, err, logDir)
		}
	}
	return s, nil
}

// startDev starts one `hookline dev` (ingest, dispatcher, scheduler and
// kfake persisted to a fresh data directory) and waits until it serves.
func startDev(ctx context.Context, cfg config, name string) (*stack, error) {
	gp, err := freePort()
	if err != nil {
		return nil, err
	}
	kp, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "hookline-chaos-dev-")
	if err != nil {
		return nil, err
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	s := &stack{
		prefix: "hookline.", brokers: "127.0.0.1:" + strconv.Itoa(kp), apiKey: "hk_chaos_" + hex.EncodeToString(b),
		ingest: []string{"127.0.0.1:" + strconv.Itoa(gp)}, dataDir: dir,
	}
	s.procs = []*proc{newProc(filepath.Join(cfg.LogDir, name), "dev", "dev", filepath.Join(cfg.BinDir, "hookline"),
		"dev", "--data-dir", dir, "--grpc-addr", s.ingest[0], "--kafka-addr", s.brokers,
		"--metrics-addr", "", "--api-key", s.apiKey, "--log-level", "warn")}
	if err := s.procs[0].run(); err != nil {
		s.close()
		return nil, err
	}
	if err := waitServing(ctx, s.ingest[0], 2*time.Minute); err != nil {
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
func (s *stack) find(kind string, i int) *proc {
	for _, p := range s.procs {
		if p.kind == kind {
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
		if p.kind == kind {
			kib = max(kib, p.peakKiB())
		}
	}
	return float64(kib) / 1024
}

// close stops ingest first, then the dispatchers, then the schedulers.
func (s *stack) close() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		s.procs[i].stop(15 * time.Second)
	}
	if s.dataDir != "" {
		_ = os.RemoveAll(s.dataDir)
	}
}

// newAPIKey makes a key with `hookline apikey new`, as an operator would,
// and returns the key and its --api-keys entry.
func newAPIKey(ctx context.Context, hookline string) (key, entry string, err error) {
	out, err := exec.CommandContext(ctx, hookline, "apikey", "new", "--tenant", "chaos").Output()
	if err != nil {
		return "", "", fmt.Errorf("hookline apikey new: %w", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "key:"); ok {
			key = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "entry:"); ok {
			entry = strings.TrimSpace(v)
		}
	}
	if key == "" || entry == "" {
		return "", "", fmt.Errorf("hookline apikey new printed no key or entry: %q", out)
	}
	return key, entry, nil
}

// waitServing polls gRPC health until addr answers SERVING, within limit.
func waitServing(ctx context.Context, addr string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := hc.Check(cctx, &healthpb.HealthCheckRequest{})
		ccancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("health %v", resp.GetStatus())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not SERVING within %v: last error: %w", limit, err)
		case <-tick.C:
		}
	}
}
