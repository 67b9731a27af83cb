package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// ingestProc runs bin/ingest as a subprocess and samples its memory.
type ingestProc struct {
	bin, logDir, addr string
	args, env         []string

	cmd  *exec.Cmd
	done chan struct{}
	mem  *memSampler
}

// start runs ingest (its log in logDir/name.log) and returns how long it
// took from exec to SERVING.
func (p *ingestProc) start(ctx context.Context, name string) (time.Duration, error) {
	lf, err := os.Create(filepath.Join(p.logDir, name+".log"))
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Env = append(os.Environ(), p.env...)
	if err := cmd.Start(); err != nil {
		lf.Close()
		return 0, fmt.Errorf("start %s (run make build first): %w", p.bin, err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); lf.Close(); close(p.done) }()
	p.mem = newMemSampler(cmd.Process.Pid)
	if err := waitServing(ctx, p.addr, p.done); err != nil {
		return 0, fmt.Errorf("%s: %w (log: %s)", name, err, lf.Name())
	}
	return time.Since(t0), nil
}

// stop ends ingest with SIGTERM (SIGKILL after 30 s); idempotent.
func (p *ingestProc) stop() {
	if p.cmd == nil {
		return
	}
	p.mem.close()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	p.cmd = nil
}

// waitServing polls ingest's health every 20 ms until SERVING.
func waitServing(ctx context.Context, addr string, exited <-chan struct{}) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := hc.Check(cctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("ingest exited before serving")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("not SERVING after 2 minutes")
}

// memSampler reads a process's VmRSS every 100 ms and keeps the peak.
type memSampler struct {
	pid  int
	quit chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	last    int64 // KiB
	maxSeen int64
}

func newMemSampler(pid int) *memSampler {
	s := &memSampler{pid: pid, quit: make(chan struct{})}
	s.wg.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			s.read()
			select {
			case <-s.quit:
				return
			case <-t.C:
			}
		}
	})
	return s
}

func (s *memSampler) read() {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", s.pid))
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			s.mu.Lock()
			s.last, s.maxSeen = n, max(s.maxSeen, n)
			s.mu.Unlock()
		}
	}
}

// now returns the current RSS in MiB.
func (s *memSampler) now() float64 {
	s.read()
	s.mu.Lock()
	defer s.mu.Unlock()
	return float64(s.last) / 1024
}

// peak returns the largest RSS sampled, in MiB.
func (s *memSampler) peak() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return float64(s.maxSeen) / 1024
}

func (s *memSampler) close() {
	close(s.quit)
	s.wg.Wait()
}
