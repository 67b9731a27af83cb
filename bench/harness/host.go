package harness

import (
	"os"
	"strings"
)

// LoadAvg reads the 1, 5 and 15 minute load averages ("1.2 / 0.8 / 0.5"),
// or "unknown": how busy the machine was, which timings depend on.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " / ")
}
