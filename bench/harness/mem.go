package harness

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MemFigures is a process's resident memory in KiB: the last sample, the
// largest sample, and the kernel's high-water mark (VmHWM).
type MemFigures struct {
	Name            string
	Last, Peak, HWM int64
}

// PeakKiB is the larger of Peak and HWM.
func (f MemFigures) PeakKiB() int64 { return max(f.Peak, f.HWM) }

// merge folds a later run's figures into f.
func (f MemFigures) merge(later MemFigures) MemFigures {
	f.Last = later.Last
	f.Peak = max(f.Peak, later.Peak)
	f.HWM = max(f.HWM, later.HWM)
	return f
}

// memSampler reads a process's VmRSS every 100 ms from /proc. Safe for
// concurrent use.
type memSampler struct {
	pid  int
	quit chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	fig  MemFigures
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
func (s *memSampler) figures() MemFigures {
	s.read()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fig
}

// stop ends sampling and returns the final figures.
func (s *memSampler) stop() MemFigures {
	f := s.figures()
	close(s.quit)
	s.wg.Wait()
	return f
}
