package history

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestTemporaryIndexesOfDeadProcessesAreRemovedAtStart: without
// --data-dir the index lives in a temporary directory that Close
// removes; one left by a process killed with -9 is removed by the next
// start, and only those: a live process's index, a directory without a
// pid in its name and other files stay.
func TestTemporaryIndexesOfDeadProcessesAreRemovedAtStart(t *testing.T) {
	parent := t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skip("no process to outlive:", err)
	}
	mk := func(name string) string {
		d := filepath.Join(parent, name)
		if err := os.MkdirAll(filepath.Join(d, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	stale := mk(tempPrefix + strconv.Itoa(dead.Process.Pid) + "-123")
	live := mk(tempPrefix + strconv.Itoa(os.Getpid()) + "-456")
	old := mk(tempPrefix + "789") // an older version's name: owner unknown
	other := mk("something-else-" + strconv.Itoa(dead.Process.Pid) + "-1")

	dir, err := makeTempDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{live, old, other, dir} {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("%s was removed: %v", d, err)
		}
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("the dead process's index %s is still there (%v)", stale, err)
	}
	if got := removeStale(parent); len(got) != 0 {
		t.Fatalf("removed %v on the second pass", got)
	}
	if mine := filepath.Base(dir); !strings.HasPrefix(mine, tempPrefix+strconv.Itoa(os.Getpid())+"-") {
		t.Fatalf("the new directory %s does not name its owner", mine)
	}
}
