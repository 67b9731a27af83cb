package dispatcher

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestTheStateDumpSaysWhatAnOrderedLaneWaitsFor: a blocked head is named
// outside, blocked, in its lane's account, with the endpoint's outage
// state; a dispatcher whose loop does not run answers no dump, in
// bounded time.
func TestTheStateDumpSaysWhatAnOrderedLaneWaitsFor(t *testing.T) {
	f := newBlockFixture(t)
	f.publish(t, "a", 0, 0)
	f.e.runDry(t)
	d := f.e.describe(f.s.now())
	for _, want := range []string{"lane ep_1:", `key "a"`, "dlv_a0@0(until", "blocked true", "outage false", "window: "} {
		if !strings.Contains(d, want) {
			t.Fatalf("state dump lacks %q:\n%s", want, d)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := f.s.DumpState(ctx); err == nil {
		t.Fatal("a dispatcher whose loop does not run answered a state dump")
	}
}
