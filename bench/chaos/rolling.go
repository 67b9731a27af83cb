package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/hookline/hookline/bench/harness"
)

// The rolling upgrade: what Kubernetes does to the chart's workloads
// (deploy/helm/hookline) on helm upgrade, done to the processes under
// load. Each process in turn gets SIGTERM, drains within its grace
// period, and a new one starts with the same arguments (the same
// transactional id, as a StatefulSet pod keeps its name); the next is
// replaced only once the new one is ready: /readyz 200 for the
// dispatcher and the scheduler (--health-addr), gRPC SERVING for ingest.
// The binary is the same one: the scenario proves the handover, not a
// change of record format.
var rollingScenario = scenario{
	name: "rolling-upgrade",
	doc:  "replace every scheduler, then every dispatcher, then every ingest, one at a time under load: SIGTERM, drain, start again, wait until ready",
	fault: func(ctx context.Context, e *env) (string, error) {
		start := time.Now()
		var steps []string
		for _, kind := range []string{"scheduler", "dispatcher", "ingest"} {
			for i := 0; ; i++ {
				p := e.st.find(kind, i)
				if p == nil {
					break
				}
				// Spread over the load (10%, 22%, 34%, …, 70% for six
				// processes), so that every handover happens with
				// deliveries in flight; a step that is late starts at
				// once after the one before is ready.
				if err := e.at(ctx, 0.1+0.12*float64(len(steps))); err != nil {
					return "", err
				}
				e.mark()
				took, ready, err := e.replace(ctx, kind, i, p)
				if err != nil {
					return "", fmt.Errorf("replacing %s: %w", p.Name, err)
				}
				steps = append(steps, fmt.Sprintf("%s %.1f s (%s)", p.Name, took.Seconds(), ready))
			}
		}
		return fmt.Sprintf("SIGTERM, drain, restart and wait until ready, one process at a time from 10%% to 70%% of the load: %s; %.0f s in all",
			strings.Join(steps, ", "), time.Since(start).Seconds()), nil
	},
}

func init() { scenarios = append(scenarios, rollingScenario) }

// Grace periods as the chart sets them: the dispatcher's drain
// (--drain-timeout 15 s) plus 30 s; 30 s for the others.
var rollingGrace = map[string]time.Duration{"dispatcher": 45 * time.Second, "scheduler": 30 * time.Second, "ingest": 30 * time.Second}

// replace stops the i-th process of kind gracefully, starts it again and
// waits until it is ready; it returns how long that took and what the
// new process answered when it was.
func (e *env) replace(ctx context.Context, kind string, i int, p *harness.Proc) (time.Duration, string, error) {
	start := time.Now()
	p.Stop(rollingGrace[kind])
	if err := p.Err(); err != nil {
		// A drain that ran into its grace period is killed: that is a
		// failed rolling step, not a clean one.
		return 0, "", fmt.Errorf("did not exit cleanly on SIGTERM within %v: %w (log %s)", rollingGrace[kind], err, p.LogPath())
	}
	if err := p.Start(); err != nil {
		return 0, "", err
	}
	if kind == "ingest" {
		err := harness.WaitServing(ctx, e.st.ingest[i], 2*time.Minute, p)
		return time.Since(start), "SERVING", err
	}
	ready, err := waitReady(ctx, e.st.health[p.Name], 2*time.Minute, p)
	return time.Since(start), ready, err
}

// waitReady polls GET /readyz on addr until it answers 200, within limit,
// and returns its answer; it gives up at once if p exits.
func waitReady(ctx context.Context, addr string, limit time.Duration, p *harness.Proc) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
		if err != nil {
			return "", err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
			resp.Body.Close()
			last = strings.TrimSpace(string(body))
			if resp.StatusCode == http.StatusOK {
				return last, nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, last)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("not ready within %v: last /readyz: %s (log %s)", limit, last, p.LogPath())
		case <-p.Done():
			return "", fmt.Errorf("exited while starting: %w (log %s)", p.Err(), p.LogPath())
		case <-tick.C:
		}
	}
}
