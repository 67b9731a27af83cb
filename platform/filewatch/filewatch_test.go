package filewatch

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestGetRereadsChangedFilesOncePerIntervalAndKeepsTheLastGoodValue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("1")
	now := time.Unix(0, 0)
	parses := 0
	var reports []error
	f, err := Load(func(c [][]byte) (int, error) {
		parses++
		return strconv.Atoi(strings.TrimSpace(string(c[0])))
	}, []string{path}, WithClock(func() time.Time { return now }), WithInterval(time.Second),
		WithReport(func(err error) { reports = append(reports, err) }))
	if err != nil || f.Get() != 1 {
		t.Fatalf("Load: %v, %v", f, err)
	}

	write("2")
	if got := f.Get(); got != 1 {
		t.Fatalf("within the interval: %d, want the old 1", got)
	}
	now = now.Add(time.Second)
	if got := f.Get(); got != 2 {
		t.Fatalf("after the interval: %d, want 2", got)
	}

	write("not a number")
	for range 3 {
		now = now.Add(time.Second)
		if got := f.Get(); got != 2 {
			t.Fatalf("after a bad change: %d, want the last good 2", got)
		}
	}
	if err := f.Reload(); err == nil {
		t.Fatal("Reload of a bad change: no error")
	}
	if len(reports) != 2 || reports[0] != nil || reports[1] == nil {
		t.Fatalf("reports %v: want nil for the reload, then the rejection once", reports)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := f.Reload(); !errors.Is(err, os.ErrNotExist) || f.Get() != 2 {
		t.Fatalf("a missing file: %v, value %d", err, f.Get())
	}
	write("2")
	before := parses
	if err := f.Reload(); err != nil || parses != before {
		t.Fatalf("unchanged contents were parsed again (%v)", err)
	}
}

func TestLoadFailsOnAMissingOrBadFile(t *testing.T) {
	parse := func(c [][]byte) (string, error) {
		if len(c[0]) == 0 {
			return "", errors.New("empty")
		}
		return string(c[0]), nil
	}
	dir := t.TempDir()
	if _, err := Load(parse, []string{filepath.Join(dir, "missing")}); err == nil {
		t.Error("a missing file loaded")
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(parse, []string{empty}); err == nil {
		t.Error("a file that does not parse loaded")
	}
}
