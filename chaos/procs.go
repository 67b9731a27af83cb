package main

import (
	"bufio"
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

// proc is one service process of a run, restartable with the same
// arguments after a kill -9. Its resident memory is sampled every 200 ms
// while it lives, across restarts.
type proc struct {
	name, kind, bin string
	args            []string
	logDir          string

	mu    sync.Mutex
	cmd   *exec.Cmd
	done  chan struct{}
	peak  int64 // KiB, the largest VmRSS or VmHWM seen, across restarts
	quit  chan struct{}
	wg    sync.WaitGroup
	start int // restarts so far
}

func newProc(logDir, kind, name, bin string, args ...string) *proc {
	return &proc{name: name, kind: kind, bin: bin, args: args, logDir: logDir}
}

// run starts the process (again); its output goes to logDir/name.N.log.
func (p *proc) run() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := os.MkdirAll(p.logDir, 0o755); err != nil {
		return err
	}
	lf, err := os.Create(filepath.Join(p.logDir, fmt.Sprintf("%s.%d.log", p.name, p.start)))
	if err != nil {
		return err
	}
	p.start++
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		return fmt.Errorf("start %s (run make build first): %w", p.bin, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		lf.Close()
		close(done)
	}()
	p.cmd, p.done = cmd, done
	if p.quit == nil {
		p.quit = make(chan struct{})
		p.wg.Go(p.sample)
	}
	return nil
}

// kill9 sends SIGKILL and waits (bounded) until the process is gone.
func (p *proc) kill9() error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	p.readMem(cmd.Process.Pid)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) survived SIGKILL for 10s", p.name, cmd.Process.Pid)
	}
}

// stop ends the process gracefully (SIGTERM, then SIGKILL after grace)
// and stops sampling.
func (p *proc) stop(grace time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(grace):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	if p.quit != nil {
		close(p.quit)
		p.wg.Wait()
		p.quit = nil
	}
}

func (p *proc) sample() {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		p.mu.Lock()
		cmd := p.cmd
		p.mu.Unlock()
		if cmd != nil && cmd.Process != nil {
			p.readMem(cmd.Process.Pid)
		}
		select {
		case <-p.quit:
			return
		case <-t.C:
		}
	}
}

// readMem folds the process's VmRSS and VmHWM into its peak.
func (p *proc) readMem(pid int) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		p.mu.Lock()
		p.peak = max(p.peak, n)
		p.mu.Unlock()
	}
}

func (p *proc) peakKiB() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peak
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
