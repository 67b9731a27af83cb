package harness

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestProcRestartsAfterKill9AndKeepsItsMemoryFigures: a process killed
// with SIGKILL starts again with the same arguments, its restart logs to
// a file of its own, and its memory figures span both runs.
func TestProcRestartsAfterKill9AndKeepsItsMemoryFigures(t *testing.T) {
	dir := t.TempDir()
	p, err := StartProc(dir, "sleeper", "/bin/sh", []string{"HARNESS_TEST=1"}, "-c", "echo run $HARNESS_TEST; exec sleep 30")
	if err != nil {
		t.Fatal(err)
	}
	first := p.Done()
	if err := p.Kill9(); err != nil {
		t.Fatal(err)
	}
	<-first
	if p.Mem().PeakKiB() == 0 {
		t.Fatal("no memory sampled during the first run")
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	if p.LogPath() != filepath.Join(dir, "sleeper.1.log") {
		t.Fatalf("restart logs to %s", p.LogPath())
	}
	ctx, cancel := Exited(t.Context(), p)
	defer cancel()
	f := p.Stop(5 * time.Second)
	<-ctx.Done() // the stop ends the run, so Exited fires
	if f.Name != "sleeper" || p.Mem().PeakKiB() == 0 {
		t.Fatalf("figures %+v, memory %+v", f, p.Mem())
	}
	for _, log := range []string{"sleeper.log", "sleeper.1.log"} {
		if _, err := os.Stat(filepath.Join(dir, log)); err != nil {
			t.Fatal(err)
		}
	}
}
