package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	// links are each service process's own network to the brokers
	// (harness.KafkaLink), by process name: a fault can partition or slow
	// one process's link and no other.
	links   map[string]*harness.KafkaLink
	dataDir string // removed on close (hookline dev)
	// The stack is the processes' supervisor, as Kubernetes is in
	// production (restartPolicy Always): a process that exits by itself
	// is started again after supervisorDelay, and its exit is recorded
	// in exits (the row's "exits" column), never hidden.
	closing atomic.Bool
	stopped chan struct{}
	exitsMu sync.Mutex
	exits   []string
}

// startStack starts replicas of bin/scheduler, bin/dispatcher and
// bin/ingest on prefix and waits until every ingest is SERVING.
func startStack(ctx context.Context, cfg config, name, brokers string, replicas int, shape loadShape) (*stack, error) {
	prefix := fmt.Sprintf("chaos%d-%s.", time.Now().Unix(), name)
	key, entry, err := harness.NewAPIKey(ctx, filepath.Join(cfg.BinDir, "hookline"), "chaos")
	if err != nil {
		return nil, err
	}
	s := &stack{prefix: prefix, brokers: brokers, apiKey: key, health: map[string]string{}, links: map[string]*harness.KafkaLink{}, stopped: make(chan struct{})}
	// Each process dials the brokers through a link of its own; the
	// ledger and the faults' admin client dial them directly.
	linked := func(name string) ([]string, error) {
		l, err := harness.NewKafkaLink(name, strings.Split(brokers, ",")...)
		if err != nil {
			return nil, err
		}
		s.links[name] = l
		return []string{"--kafka-brokers", l.Bootstrap()}, nil
	}
	healthAddr := func(name string) ([]string, error) {
		port, err := harness.FreePort()
		if err != nil {
			return nil, err
		}
		s.health[name] = "127.0.0.1:" + strconv.Itoa(port)
		return []string{"--health-addr", s.health[name]}, nil
	}
	common := []string{"--topic-prefix", prefix, "--log-level", cfg.LogLevel, "--topic-partitions", "6"}
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
		ln, err := linked(name)
		if err != nil {
			s.close()
			return nil, err
		}
		s.procs = append(s.procs, newProc(logDir, "scheduler", name, filepath.Join(cfg.BinDir, "scheduler"),
			slices.Concat(common, ln, ha, []string{"--group", prefix + "scheduler", "--transactional-id", id})...))
	}
	for i := range replicas {
		id, name := fmt.Sprintf("%sdispatcher-%d", prefix, i), fmt.Sprintf("dispatcher-%d", i)
		ha, err := healthAddr(name)
		if err != nil {
			return nil, err
		}
		ln, err := linked(name)
		if err != nil {
			s.close()
			return nil, err
		}
		s.procs = append(s.procs, newProc(logDir, "dispatcher", name, filepath.Join(cfg.BinDir, "dispatcher"),
			slices.Concat(common, ln, secrets, ha, []string{"--group", prefix + "dispatcher", "--transactional-id", id, "--group-instance-id", id, "--answers-dir", filepath.Join(logDir, name+".answers"), "--allow-private-destinations"}, shape.dispatchArgs)...))
	}
	for i := range replicas {
		port, err := harness.FreePort()
		if err != nil {
			return nil, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		s.ingest = append(s.ingest, addr)
		name := fmt.Sprintf("ingest-%d", i)
		ln, err := linked(name)
		if err != nil {
			s.close()
			return nil, err
		}
		s.procs = append(s.procs, newProc(logDir, "ingest", name, filepath.Join(cfg.BinDir, "ingest"),
			slices.Concat(common, ln, secrets, []string{"--grpc-addr", addr, "--api-keys", entry, "--allow-http", "--allow-private-destinations"}, shape.ingestArgs)...))
	}
	for _, p := range s.procs {
		if err := p.Start(); err != nil {
			s.close()
			return nil, err
		}
		go s.supervise(p)
	}
	for _, addr := range s.ingest {
		if err := harness.WaitServing(ctx, addr, 2*time.Minute, s.procs...); err != nil {
			s.close()
			return nil, fmt.Errorf("ingest %s: %w (logs in %s)", addr, err, logDir)
		}
	}
	// Every dispatcher and scheduler ready (partitions assigned, first
	// poll back) before the load: a member that joins once the load runs
	// moves partitions under it, and that start-up rebalance (3.1 s of a
	// rolling-upgrade row's healthy p99 once) is no row's fault.
	for _, p := range s.procs {
		if addr, ok := s.health[p.Name]; ok {
			if _, err := waitReady(ctx, addr, 2*time.Minute, p); err != nil {
				s.close()
				return nil, fmt.Errorf("%s: %w", p.Name, err)
			}
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
		procs: []*harness.Proc{d.Proc}, stopped: make(chan struct{})}
	if err := s.procs[0].Start(); err != nil {
		s.close()
		return nil, err
	}
	go s.supervise(s.procs[0])
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

// supervisorDelay is how long the stack waits before it starts a
// process that exited by itself again (kubelet's first back-off is 10 s;
// shorter here, so the load still meets the restarted process).
const supervisorDelay = 2 * time.Second

// supervise starts p again whenever it exits by itself (not through the
// harness's Kill9 or Stop) until the stack closes, and records each
// such exit with the last line p logged.
func (s *stack) supervise(p *harness.Proc) {
	for {
		runs, _ := p.Runs()
		select {
		case <-p.Done():
		case <-s.stopped:
			return
		}
		if s.closing.Load() {
			return
		}
		if now, ended := p.Runs(); ended || now != runs {
			// Ended by a fault (kill -9, SIGTERM): the fault starts it
			// again; wait for that run.
			for now == runs {
				select {
				case <-s.stopped:
					return
				case <-time.After(100 * time.Millisecond):
				}
				now, _ = p.Runs()
			}
			continue
		}
		s.exitsMu.Lock()
		s.exits = append(s.exits, fmt.Sprintf("%s %s exited by itself (%v): %s", time.Now().UTC().Format("15:04:05"), p.Name, p.Err(), lastLine(p.LogPath())))
		s.exitsMu.Unlock()
		select {
		case <-s.stopped:
			return
		case <-time.After(supervisorDelay):
		}
		if now, _ := p.Runs(); now != runs {
			continue // a fault started it meanwhile (kill -9 and restart)
		}
		if err := p.Start(); err != nil {
			s.exitsMu.Lock()
			s.exits = append(s.exits, fmt.Sprintf("%s could not be started again: %v", p.Name, err))
			s.exitsMu.Unlock()
			return
		}
	}
}

// exited returns the exits the supervisor saw.
func (s *stack) exited() []string {
	s.exitsMu.Lock()
	defer s.exitsMu.Unlock()
	return slices.Clone(s.exits)
}

// lastLine is the last line of the file at path (at most 160 bytes).
func lastLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	l := lines[len(lines)-1]
	if len(l) > 160 {
		l = l[:160] + "…"
	}
	return l
}

// close stops ingest first, then the dispatchers, then the schedulers.
func (s *stack) close() {
	if s.closing.Swap(true) {
		return
	}
	close(s.stopped)
	for i := len(s.procs) - 1; i >= 0; i-- {
		s.procs[i].Stop(15 * time.Second)
	}
	for _, l := range s.links {
		l.Close()
	}
	if s.dataDir == "" && s.brokers != "" {
		s.deleteTopics() // cleanup.go
	}
	if s.dataDir != "" {
		_ = os.RemoveAll(s.dataDir)
	}
}
