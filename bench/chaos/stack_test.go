package main

import (
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/bench/harness"
)

// TestTheStackRestartsAProcessThatExitsByItselfAndNamesIt: a process
// that exits on its own (as a service does when it cannot end a
// transaction) is started again and its exit is recorded with its last
// log line; a process the run kills with kill -9 is not counted (the
// fault restarts it).
func TestTheStackRestartsAProcessThatExitsByItselfAndNamesIt(t *testing.T) {
	dir := t.TempDir()
	quitter := newProc(dir, "scheduler", "quitter", "/bin/sh", "-c", "echo 'scheduler: end transaction: broker gone'; exit 1")
	sleeper := newProc(dir, "dispatcher", "sleeper", "/bin/sh", "-c", "exec sleep 60")
	st := &stack{procs: []*harness.Proc{quitter, sleeper}, stopped: make(chan struct{})}
	defer st.close()
	for _, p := range st.procs {
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		go st.supervise(p)
	}
	if err := sleeper.Kill9(); err != nil {
		t.Fatal(err)
	}
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(30 * time.Second) // a bound on the wait, not the condition
	for {
		if runs, _ := quitter.Runs(); runs >= 2 {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("the process that exited was not started again; exits %v", st.exited())
		case <-time.After(50 * time.Millisecond):
		}
	}
	exits := st.exited()
	if len(exits) == 0 || !strings.Contains(exits[0], "quitter exited by itself") || !strings.Contains(exits[0], "end transaction: broker gone") {
		t.Fatalf("exits %q, want the quitter named with its last log line", exits)
	}
	for _, e := range exits {
		if strings.Contains(e, "sleeper") {
			t.Fatalf("a process the run killed was counted as exiting by itself: %q", e)
		}
	}
	if runs, _ := sleeper.Runs(); runs != 2 {
		t.Fatalf("the killed process ran %d times, want 2 (the fault's restart only)", runs)
	}
}
