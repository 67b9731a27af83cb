// Package harness holds what the load harness (bench/loadbench) and the
// crash suite (bench/chaos) share: Hookline's binaries as subprocesses
// with their logs and resident memory, chaos-proof restarts, an API key
// made as an operator would, a wait for ingest to serve, free loopback
// ports, and an Apache Kafka of the run's own through scripts/kafka.sh.
package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Proc is one subprocess of a run (a Hookline binary or a tool): its log
// file and a sampler of its resident memory while it runs. It can be
// killed with SIGKILL and started again with the same arguments; its
// memory figures span every run. Safe for concurrent use.
type Proc struct {
	Name, Kind string // Kind groups replicas ("ingest", "dispatcher", …)
	bin        string
	args, env  []string
	logDir     string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when the current run has exited
	err     error         // its exit error, valid after done
	logPath string
	runs    int
	ended   bool // the current run was ended by Kill9 or Stop, not by itself
	mem     *memSampler
	past    MemFigures // of the runs before the current one
}

// NewProc prepares bin with args (and env added to this process's
// environment); Start runs it.
func NewProc(logDir, name, bin string, env []string, args ...string) *Proc {
	return &Proc{Name: name, bin: bin, args: args, env: env, logDir: logDir}
}

// StartProc is NewProc and Start.
func StartProc(logDir, name, bin string, env []string, args ...string) (*Proc, error) {
	p := NewProc(logDir, name, bin, env, args...)
	return p, p.Start()
}

// Start runs the process (again, after it exited or was killed). Its
// stdout and stderr go to logDir/name.log, a restart's to name.N.log.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := os.MkdirAll(p.logDir, 0o755); err != nil {
		return err
	}
	file := p.Name + ".log"
	if p.runs > 0 {
		file = fmt.Sprintf("%s.%d.log", p.Name, p.runs)
	}
	lf, err := os.Create(filepath.Join(p.logDir, file))
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Env = append(os.Environ(), p.env...)
	if err := cmd.Start(); err != nil {
		lf.Close()
		return fmt.Errorf("start %s (run make build first): %w", p.bin, err)
	}
	p.runs++
	p.ended = false
	done := make(chan struct{})
	p.cmd, p.done, p.err, p.logPath = cmd, done, nil, lf.Name()
	p.mem = newMemSampler(cmd.Process.Pid)
	go func() {
		err := cmd.Wait()
		lf.Close()
		p.mu.Lock()
		if p.done == done {
			p.err = err
		}
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// Done is closed when the current run has exited.
func (p *Proc) Done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// Err is the current run's exit error, once Done is closed.
func (p *Proc) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// LogPath is the current run's log file.
func (p *Proc) LogPath() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logPath
}

// endRun folds the current run's memory into the past runs' and stops
// its sampler; it returns the current run's figures.
func (p *Proc) endRun() MemFigures {
	p.mu.Lock()
	s := p.mem
	p.mem = nil
	p.mu.Unlock()
	if s == nil {
		return MemFigures{Name: p.Name}
	}
	f := s.stop()
	p.mu.Lock()
	p.past = p.past.merge(f)
	p.mu.Unlock()
	f.Name = p.Name
	return f
}

// Kill9 sends SIGKILL and waits (at most 10 s) until the process is gone.
func (p *Proc) Kill9() error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	p.endRun()
	p.markEnded()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) survived SIGKILL for 10s", p.Name, cmd.Process.Pid)
	}
}

func (p *Proc) markEnded() {
	p.mu.Lock()
	p.ended = true
	p.mu.Unlock()
}

// Runs is how many times the process was started, and whether the
// current (or last) run was ended by Kill9 or Stop rather than exiting
// by itself: a supervisor restarts only a run that ended by itself.
func (p *Proc) Runs() (runs int, endedByHarness bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runs, p.ended
}

// Pause stops the process with SIGSTOP, as a stalled VM, a long GC
// pause or a debugger would: its sockets stay open, its heartbeats and
// timers stop, nothing it holds is released. Resume sends SIGCONT.
func (p *Proc) Pause() error { return p.signal(syscall.SIGSTOP) }

// Resume continues a paused process (SIGCONT): a zombie owner that wakes
// up after its session timed out and must find itself fenced.
func (p *Proc) Resume() error { return p.signal(syscall.SIGCONT) }

func (p *Proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("%s is not running", p.Name)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("%s: %v: %w", p.Name, sig, err)
	}
	return nil
}

// Stop sends SIGTERM, waits up to grace, then SIGKILL. It returns the
// current run's memory figures, read just before the signal.
func (p *Proc) Stop(grace time.Duration) MemFigures {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return MemFigures{Name: p.Name}
	}
	f := p.endRun()
	p.markEnded()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		_ = cmd.Process.Kill()
		<-done
	}
	return f
}

// Mem is the process's memory over every run so far: the last sample
// of the current (or last) run, and the largest sample and VmHWM of all.
func (p *Proc) Mem() MemFigures {
	p.mu.Lock()
	s, f := p.mem, p.past
	p.mu.Unlock()
	if s != nil {
		f = f.merge(s.figures())
	}
	f.Name = p.Name
	return f
}

// Exited returns a context canceled, with the cause, when any of procs'
// current runs exits.
func Exited(ctx context.Context, procs ...*Proc) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	for _, p := range procs {
		done := p.Done()
		go func() {
			select {
			case <-done:
				err := p.Err()
				if err == nil {
					err = errors.New("exit status 0")
				}
				cancel(fmt.Errorf("%s exited early: %w; see %s", p.Name, err, p.LogPath()))
			case <-ctx.Done():
			}
		}()
	}
	return ctx, func() { cancel(nil) }
}
