//go:build !race

package e2e

// raceEnabled reports whether the race detector is compiled in.
const raceEnabled = false
