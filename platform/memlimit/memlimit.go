// Package memlimit gives the Go runtime a soft memory limit when the
// operator set none: 90% of the container's memory limit (cgroup v2
// memory.max, or v1 memory.limit_in_bytes). The runtime then collects
// harder as the process nears the container's limit instead of being
// killed by it. Hookline's images are built without cgo, so this limit
// also covers what Pebble (the delivery history index) manages by hand:
// its block cache and memtables are Go memory.
package memlimit

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// Share is the part of the container's limit given to the Go runtime;
// the rest is left for what it does not count (thread stacks outside Go,
// the binary's pages, the kernel's accounting of page cache).
const Share = 0.9

// files are where a container's memory limit is read, cgroup v2 first.
var files = []string{"memory.max", "memory/memory.limit_in_bytes"}

// Set sets the soft memory limit from the cgroup under root
// ("/sys/fs/cgroup") unless getenv("GOMEMLIMIT") is set, and says what it
// did (for the start-up log): the limit in bytes (0: none set) and why.
func Set(getenv func(string) string, root string) (int64, string) {
	if v := getenv("GOMEMLIMIT"); v != "" {
		return debug.SetMemoryLimit(-1), "GOMEMLIMIT=" + v
	}
	limit, file, ok := cgroupLimit(root)
	if !ok {
		return 0, "no GOMEMLIMIT and no container memory limit: the Go heap is bounded by GOGC only"
	}
	n := int64(float64(limit) * Share)
	debug.SetMemoryLimit(n)
	return n, fmt.Sprintf("%.0f%% of the container's memory limit (%s: %d bytes)", Share*100, file, limit)
}

// cgroupLimit returns the first memory limit set in files under root.
func cgroupLimit(root string) (int64, string, bool) {
	for _, f := range files {
		path := filepath.Join(root, f)
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		n, err := strconv.ParseInt(s, 10, 64)
		// "max" (v2) or a huge number near MaxInt64 (v1) means no limit.
		if err != nil || n <= 0 || n >= math.MaxInt64/2 {
			continue
		}
		return n, path, true
	}
	return 0, "", false
}
