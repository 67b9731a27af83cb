package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one subprocess of the run (a Hookline binary or a tool) with its
// log file and a sampler of its resident memory. Not safe for concurrent
// stop calls.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	mem  *memSampler
	done chan struct{} // closed when the process has exited
	err  error         // its exit error, valid after done
}

// startProc starts bin with args, its stdout and stderr in logDir/name.log.
func startProc(logDir, name, bin string, env []string, args ...string) (*proc, error) {
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	lf, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s (run make build first): %w", bin, err)
	}
	p := &proc{name: name, cmd: cmd, log: lf, done: make(chan struct{})}
	p.mem = newMemSampler(cmd.Process.Pid)
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM, waits up to grace, then SIGKILL. It returns the
// process's memory figures read just before the signal.
func (p *proc) stop(grace time.Duration) memFigures {
	m := p.mem.stop()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	p.log.Close()
	return m
}

// exited returns a context canceled, with the cause, when any of procs exits.
func exited(ctx context.Context, procs ...*proc) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	for _, p := range procs {
		go func() {
			select {
			case <-p.done:
				err := p.err
				if err == nil {
					err = errors.New("exit status 0")
				}
				cancel(fmt.Errorf("%s exited early: %w; see %s", p.name, err, p.log.Name()))
			case <-ctx.Done():
			}
		}()
	}
	return ctx, func() { cancel(nil) }
}

// memFigures is a process's resident memory in KiB: the last sample, the
// largest sample, and the kernel's high-water mark (VmHWM).
type memFigures struct {
	Name            string
	Last, Peak, HWM int64
}

// memSampler reads a process's VmRSS every 100 ms from /proc. Safe for
// concurrent use.
type memSampler struct {
	pid  int
	quit chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	fig  memFigures
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

// read takes one sample.
func (s *memSampler) read() {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", s.pid))
	if err != nil {
		return
	}
	defer f.Close()
	var rss, hwm int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			rss = n
		case "VmHWM":
			hwm = n
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if rss > 0 {
		s.fig.Last = rss
		s.fig.Peak = max(s.fig.Peak, rss)
	}
	s.fig.HWM = max(s.fig.HWM, hwm)
}

// figures returns the memory seen so far.
func (s *memSampler) figures() memFigures {
	s.read()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fig
}

// stop ends sampling and returns the final figures.
func (s *memSampler) stop() memFigures {
	f := s.figures()
	close(s.quit)
	s.wg.Wait()
	return f
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// broker is the Apache Kafka 4.4 that scripts/kafka.sh runs for this
// harness, on its own ports and directory so it never meets another
// engineer's broker.
type broker struct {
	cfg       config
	bootstrap string
}

// kafkaEnv is the environment that points kafka.sh at this run's broker.
func (b *broker) kafkaEnv() []string {
	dir := b.cfg.KafkaDir
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(b.cfg.RepoDir, dir)
	}
	return []string{
		"HOOKLINE_KAFKA_PORT=" + strconv.Itoa(b.cfg.KafkaPort),
		"HOOKLINE_KAFKA_CONTROLLER_PORT=" + strconv.Itoa(b.cfg.KafkaControllerPort),
		"HOOKLINE_KAFKA_TLS_PORT=" + strconv.Itoa(b.cfg.KafkaTLSPort),
		"HOOKLINE_KAFKA_DIR=" + dir,
	}
}

// up starts the broker once and returns its bootstrap address.
func (b *broker) up(ctx context.Context) (string, error) {
	if b.bootstrap != "" {
		return b.bootstrap, nil
	}
	out, err := b.script(ctx, "up")
	if err != nil {
		_, _ = b.script(context.WithoutCancel(ctx), "down")
		return "", fmt.Errorf("kafka.sh up: %w", err)
	}
	b.bootstrap = strings.TrimSpace(out)
	return b.bootstrap, nil
}

// down stops the broker if up started it.
func (b *broker) down() error {
	if b.bootstrap == "" {
		return nil
	}
	b.bootstrap = ""
	_, err := b.script(context.Background(), "down")
	return err
}

func (b *broker) script(ctx context.Context, verb string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(b.cfg.RepoDir, "scripts/kafka.sh"), verb)
	cmd.Env = append(os.Environ(), b.kafkaEnv()...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("exit %d", ee.ExitCode())
		}
		return "", err
	}
	return string(out), nil
}
