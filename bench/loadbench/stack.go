package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// stack is one running Hookline: where its gRPC edge and Kafka are, the
// API key of tenant "bench", the topic prefix, and its processes.
type stack struct {
	grpcAddr string
	brokers  []string
	apiKey   string
	prefix   string
	procs    []*proc
	dataDir  string // removed on close (embedded only)
}

// close stops every process (ingest first, so nothing new comes in) and
// returns their final memory figures.
func (s *stack) close() []memFigures {
	var out []memFigures
	for i := len(s.procs) - 1; i >= 0; i-- {
		p := s.procs[i]
		f := p.stop(20 * time.Second)
		f.Name = p.name
		out = append([]memFigures{f}, out...)
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
	gp, err := freePort()
	if err != nil {
		return nil, err
	}
	kp, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "loadbench-"+name+"-")
	if err != nil {
		return nil, err
	}
	key, err := randomKey()
	if err != nil {
		return nil, err
	}
	s := &stack{
		grpcAddr: "127.0.0.1:" + strconv.Itoa(gp),
		brokers:  []string{"127.0.0.1:" + strconv.Itoa(kp)},
		apiKey:   key, prefix: "hookline.", dataDir: dir,
	}
	p, err := startProc(e.cfg.LogDir, name+"-dev", filepath.Join(e.cfg.BinDir, "hookline"), nil, "dev",
		"--data-dir", dir, "--grpc-addr", s.grpcAddr, "--kafka-addr", s.brokers[0],
		"--metrics-addr", "", "--api-key", key, "--log-level", "warn")
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s.procs = []*proc{p}
	if err := waitServing(ctx, s.grpcAddr, s.procs...); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// real runs bin/ingest, bin/dispatcher and bin/scheduler as three
// processes on the broker, each scenario on topics of its own prefix.
type real struct {
	cfg    config
	broker *broker
	seq    int
}

func (r *real) describe() string {
	return "real: Apache Kafka 4.4 (scripts/kafka.sh, one node) with `bin/ingest`, `bin/dispatcher`, `bin/scheduler` as separate processes; RSS per service (the broker's JVM is not counted)"
}

func (r *real) start(ctx context.Context, name string) (*stack, error) {
	bootstrap, err := r.broker.up(ctx)
	if err != nil {
		return nil, err
	}
	r.seq++
	prefix := fmt.Sprintf("bench%d-%d-%s.", time.Now().Unix(), r.seq, name)
	key, entry, err := newAPIKey(ctx, filepath.Join(r.cfg.BinDir, "hookline"))
	if err != nil {
		return nil, err
	}
	gp, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &stack{grpcAddr: "127.0.0.1:" + strconv.Itoa(gp), brokers: []string{bootstrap}, apiKey: key, prefix: prefix}
	common := []string{"--kafka-brokers", bootstrap, "--topic-prefix", prefix, "--log-level", "warn"}
	for _, svc := range []struct {
		name string
		args []string
	}{
		{"scheduler", []string{"--group", prefix + "scheduler", "--transactional-id", prefix + "scheduler"}},
		{"dispatcher", []string{"--group", prefix + "dispatcher", "--transactional-id", prefix + "dispatcher", "--allow-private-destinations"}},
		{"ingest", []string{"--grpc-addr", s.grpcAddr, "--api-keys", entry, "--allow-http", "--allow-private-destinations"}},
	} {
		p, err := startProc(r.cfg.LogDir, name+"-"+svc.name, filepath.Join(r.cfg.BinDir, svc.name), nil, append(common, svc.args...)...)
		if err != nil {
			s.close()
			return nil, err
		}
		s.procs = append(s.procs, p)
	}
	if err := waitServing(ctx, s.grpcAddr, s.procs...); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// newAPIKey makes a key with `hookline apikey new`, as an operator would,
// and returns the key and its --api-keys entry.
func newAPIKey(ctx context.Context, hookline string) (key, entry string, err error) {
	out, err := exec.CommandContext(ctx, hookline, "apikey", "new", "--tenant", "bench").Output()
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

// randomKey makes an API key for hookline dev.
func randomKey() (string, error) {
	b := make([]byte, 20)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "hk_bench_" + hex.EncodeToString(b), nil
}

// waitServing waits until ingest's gRPC health says SERVING (it has read
// the endpoint configuration from Kafka), at most two minutes, failing
// early if one of procs exits.
func waitServing(ctx context.Context, addr string, procs ...*proc) error {
	ctx, cancel := exited(ctx, procs...)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelT()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	for {
		st, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
		if err == nil {
			for {
				m, rerr := st.Recv()
				if rerr != nil {
					err = rerr
					break
				}
				if m.GetStatus() == healthpb.HealthCheckResponse_SERVING {
					return nil
				}
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("waiting for ingest on %s to serve: %w", addr, context.Cause(ctx))
		}
		if status.Code(err) != codes.Unavailable {
			return fmt.Errorf("health of ingest on %s: %w", addr, err)
		}
		// Unavailable: the connection dropped mid-stream; WaitForReady
		// blocks the next Watch until it is back.
	}
}
