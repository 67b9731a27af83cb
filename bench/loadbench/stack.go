package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hookline/hookline/bench/harness"
)

// stack is one running Hookline: where its gRPC edge and Kafka are, the
// API key of tenant "bench", the topic prefix, and its processes.
type stack struct {
	grpcAddr string
	// metricsAddr serves the dispatcher's Prometheus /metrics ("": not
	// known for this launcher).
	metricsAddr string
	brokers     []string
	apiKey      string
	prefix      string
	procs       []*harness.Proc
	dataDir     string // removed on close (embedded only)
}

// close stops every process (ingest first, so nothing new comes in) and
// returns their final memory figures.
func (s *stack) close() []harness.MemFigures {
	var out []harness.MemFigures
	for i := len(s.procs) - 1; i >= 0; i-- {
		p := s.procs[i]
		f := p.Stop(20 * time.Second)
		out = append([]harness.MemFigures{f}, out...)
	}
	if s.dataDir != "" {
		_ = os.RemoveAll(s.dataDir)
	}
	return out
}

// launcher starts a fresh Hookline for each scenario, so no backlog or
// retry of one scenario reaches the next.
type launcher interface {
	start(ctx context.Context, name string) (*stack, error)
	describe() string
}

// embedded runs bin/hookline dev: ingest, dispatcher, scheduler and kfake
// in one process.
type embedded struct{ cfg config }

func (e embedded) describe() string {
	return "embedded: one `hookline dev` process (ingest + dispatcher + scheduler + kfake); its RSS is all of Hookline"
}

func (e embedded) start(ctx context.Context, name string) (*stack, error) {
	d, err := harness.NewDev(e.cfg.LogDir, name+"-dev", filepath.Join(e.cfg.BinDir, "hookline"), "bench")
	if err != nil {
		return nil, err
	}
	s := &stack{grpcAddr: d.GRPCAddr, metricsAddr: d.MetricsAddr, brokers: []string{d.KafkaAddr}, apiKey: d.APIKey, prefix: "hookline.", dataDir: d.DataDir}
	if err := d.Proc.Start(); err != nil {
		_ = os.RemoveAll(d.DataDir)
		return nil, err
	}
	p := d.Proc
	s.procs = []*harness.Proc{p}
	if err := harness.WaitServing(ctx, s.grpcAddr, 2*time.Minute, s.procs...); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// real runs bin/ingest, bin/dispatcher and bin/scheduler as three
// processes on the broker, each scenario on topics of its own prefix.
type real struct {
	cfg    config
	broker *harness.Kafka
	seq    int
}

func (r *real) describe() string {
	return "real: Apache Kafka 4.4 (scripts/kafka.sh, one node) with `bin/ingest`, `bin/dispatcher`, `bin/scheduler` as separate processes; RSS per service (the broker's JVM is not counted)"
}

func (r *real) start(ctx context.Context, name string) (*stack, error) {
	bootstrap, err := r.broker.Up(ctx)
	if err != nil {
		return nil, err
	}
	r.seq++
	prefix := fmt.Sprintf("bench%d-%d-%s.", time.Now().Unix(), r.seq, name)
	key, entry, err := harness.NewAPIKey(ctx, filepath.Join(r.cfg.BinDir, "hookline"), "bench")
	if err != nil {
		return nil, err
	}
	gp, err := harness.FreePort()
	if err != nil {
		return nil, err
	}
	s := &stack{grpcAddr: "127.0.0.1:" + strconv.Itoa(gp), brokers: []string{bootstrap}, apiKey: key, prefix: prefix}
	common := []string{"--kafka-brokers", bootstrap, "--topic-prefix", prefix, "--log-level", "warn"}
	keyFile, err := harness.SecretsKeyFile(r.cfg.LogDir, name+"-secrets.keys")
	if err != nil {
		return nil, err
	}
	for _, svc := range []struct {
		name string
		args []string
	}{
		{"scheduler", []string{"--group", prefix + "scheduler", "--transactional-id", prefix + "scheduler"}},
		{"dispatcher", []string{"--group", prefix + "dispatcher", "--transactional-id", prefix + "dispatcher", "--allow-private-destinations", "--secrets-key-file", keyFile}},
		{"ingest", []string{"--grpc-addr", s.grpcAddr, "--api-keys", entry, "--allow-http", "--allow-private-destinations", "--publish-rate", "0", "--secrets-key-file", keyFile}},
	} {
		p, err := harness.StartProc(r.cfg.LogDir, name+"-"+svc.name, filepath.Join(r.cfg.BinDir, svc.name), nil, append(common, svc.args...)...)
		if err != nil {
			s.close()
			return nil, err
		}
		s.procs = append(s.procs, p)
	}
	if err := harness.WaitServing(ctx, s.grpcAddr, 2*time.Minute, s.procs...); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}
