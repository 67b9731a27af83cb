package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hookline/hookline/bench/harness"
)

// startProfiles takes, when --profile-dir is set, a CPU profile of the
// Hookline process (its --pprof-addr, which run sets for hookline dev)
// over the measuring window that opens at from, then its allocation
// profile, into DIR/<name>-cpu.pb.gz and DIR/<name>-allocs.pb.gz. The
// function it returns waits for them and says what was written (with
// the load average when the CPU profile began), or "" without
// --profile-dir. A failed fetch is reported in that line, not as the
// scenario's error.
func startProfiles(ctx context.Context, cfg config, name string, from time.Time, window time.Duration) func() string {
	if cfg.ProfileDir == "" {
		return func() string { return "" }
	}
	res := make(chan string, 1)
	go func() {
		select {
		case <-time.After(time.Until(from)):
		case <-ctx.Done():
			res <- name + ": not taken (" + ctx.Err().Error() + ")"
			return
		}
		load := harness.LoadAvg()
		secs := max(int((window - time.Second).Seconds()), 1)
		var notes []string
		for _, p := range []struct{ file, path string }{
			{name + "-cpu.pb.gz", fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs)},
			{name + "-allocs.pb.gz", "/debug/pprof/allocs"},
		} {
			out := filepath.Join(cfg.ProfileDir, p.file)
			if err := fetchProfile(ctx, "http://"+cfg.PprofAddr+p.path, out, time.Duration(secs+30)*time.Second); err != nil {
				notes = append(notes, fmt.Sprintf("%s: %v", p.file, err))
				continue
			}
			notes = append(notes, out)
		}
		res <- fmt.Sprintf("%s (CPU over %d s of the window, load average at its start %s)", strings.Join(notes, ", "), secs, load)
	}()
	return func() string { return <-res }
}

// fetchProfile GETs url into the file out within timeout.
func fetchProfile(ctx context.Context, url, out string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
