package memlimit

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestTheLimitIsNinetyPercentOfTheContainersUnlessGOMEMLIMITIsSet(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	write := func(t *testing.T, files map[string]string) string {
		root := t.TempDir()
		for f, v := range files {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, f), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return root
	}
	noEnv := func(string) string { return "" }
	tests := []struct {
		name   string
		files  map[string]string
		getenv func(string) string
		want   int64 // 0: no limit set by Set
	}{
		{"cgroup v2", map[string]string{"memory.max": "536870912\n"}, noEnv, 483183820},
		{"cgroup v1", map[string]string{"memory/memory.limit_in_bytes": "268435456\n"}, noEnv, 241591910},
		{"v2 without a limit", map[string]string{"memory.max": "max\n"}, noEnv, 0},
		{"v1 without a limit", map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"}, noEnv, 0},
		{"no cgroup files", nil, noEnv, 0},
		{"GOMEMLIMIT wins", map[string]string{"memory.max": "536870912\n"}, func(k string) string {
			if k == "GOMEMLIMIT" {
				return "100MiB"
			}
			return ""
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const unset = int64(1 << 62)
			debug.SetMemoryLimit(unset)
			n, why := Set(tt.getenv, write(t, tt.files))
			got := debug.SetMemoryLimit(-1)
			if tt.want == 0 {
				if got != unset {
					t.Fatalf("Set changed the limit to %d (%s)", got, why)
				}
				if tt.getenv("GOMEMLIMIT") != "" && !strings.Contains(why, "GOMEMLIMIT=100MiB") {
					t.Fatalf("why = %q", why)
				}
				return
			}
			if n != tt.want || got != tt.want {
				t.Fatalf("limit %d (runtime %d), want %d (%s)", n, got, tt.want, why)
			}
		})
	}
}
