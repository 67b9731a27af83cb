package main

import (
	"context"
	"time"

	"github.com/hookline/hookline/bench/harness"
)

// ingestProc is bin/ingest run by the harness, on one address.
type ingestProc struct {
	proc *harness.Proc
	addr string
}

// start runs ingest (again) and returns how long it took from exec to
// SERVING.
func (p *ingestProc) start(ctx context.Context) (time.Duration, error) {
	t0 := time.Now()
	if err := p.proc.Start(); err != nil {
		return 0, err
	}
	if err := harness.WaitServing(ctx, p.addr, 2*time.Minute, p.proc); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

// stop ends ingest with SIGTERM (SIGKILL after 30 s).
func (p *ingestProc) stop() { p.proc.Stop(30 * time.Second) }

// rssMiB is ingest's resident memory now, in MiB.
func (p *ingestProc) rssMiB() float64 { return float64(p.proc.Mem().Last) / 1024 }

// peakMiB is the largest resident memory seen over every run, in MiB.
func (p *ingestProc) peakMiB() float64 { return float64(p.proc.Mem().PeakKiB()) / 1024 }
