package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// What the dispatcher's window holds while a scenario measures, read
// from its Prometheus /metrics every 500 ms: when healthy throughput
// drops beside slow receivers, these say whether the window filled
// behind their attempts in flight and paused fetching (issue 26's
// isolation at saturation).

// windowSample is one scrape of the window gauges.
type windowSample struct {
	deliveries, bytes, paused float64
}

// windowFigures are the samples taken between from and to.
type windowFigures struct {
	n                                int
	maxDeliveries, maxBytes          float64
	maxPaused, sumPaused, pausedSeen float64
}

// String is the figures as one report cell.
func (f windowFigures) String() string {
	if f.n == 0 {
		return "no samples"
	}
	return fmt.Sprintf("at most %.0f deliveries, %.0f MiB; partitions fetch-paused at most %.0f, %.1f on average, in %.0f%% of %d samples",
		f.maxDeliveries, f.maxBytes/(1<<20), f.maxPaused, f.sumPaused/float64(f.n), 100*f.pausedSeen/float64(f.n), f.n)
}

// sampleWindow scrapes addr's /metrics every 500 ms until ctx ends and
// returns a function that gives the figures of the samples taken
// between from and to (waiting for the sampler to stop first). With no
// address it samples nothing.
func sampleWindow(ctx context.Context, addr string, from, to time.Time) func() windowFigures {
	var f windowFigures
	if addr == "" {
		return func() windowFigures { return f }
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				if now.Before(from) || now.After(to) {
					continue
				}
				s, err := scrapeWindow(ctx, addr)
				if err != nil {
					continue
				}
				f.n++
				f.maxDeliveries = max(f.maxDeliveries, s.deliveries)
				f.maxBytes = max(f.maxBytes, s.bytes)
				f.maxPaused = max(f.maxPaused, s.paused)
				f.sumPaused += s.paused
				if s.paused > 0 {
					f.pausedSeen++
				}
			}
		}
	})
	return func() windowFigures {
		cancel()
		wg.Wait()
		return f
	}
}

// scrapeWindow reads the window gauges from addr's /metrics.
func scrapeWindow(ctx context.Context, addr string) (windowSample, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return windowSample{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return windowSample{}, err
	}
	defer resp.Body.Close()
	var s windowSample
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		name, _, _ = strings.Cut(name, "{")
		var dst *float64
		switch name {
		case "hookline_dispatcher_window_deliveries":
			dst = &s.deliveries
		case "hookline_dispatcher_window_bytes":
			dst = &s.bytes
		case "hookline_dispatcher_window_fetch_paused":
			dst = &s.paused
		default:
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
			*dst = v
		}
	}
	return s, sc.Err()
}
