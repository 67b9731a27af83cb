package endpoints

import (
	"testing"

	hkafka "github.com/hookline/hookline/platform/kafka"
)

// TestTrackedWriteLearnsWhetherItWon: two records of one version written
// by callers that produce them themselves (as the dispatcher writes its
// auto-pause inside a transaction): the first in the log wins, the other
// learns that it lost.
func TestTrackedWriteLearnsWhetherItWon(t *testing.T) {
	e := newEnv(t)
	s := e.start()
	waitPast(t, s, e.put(record("ep_1", "https://v1", 1)))

	mine, err := hkafka.Record(e.cfg.Topics().Endpoints, "ep_1", record("ep_1", "https://mine", 2))
	if err != nil {
		t.Fatal(err)
	}
	tr := s.Track(mine)
	if TrackedID(mine) != tr.ID() {
		t.Fatalf("write id header %q, want %q", TrackedID(mine), tr.ID())
	}
	e.put(record("ep_1", "https://theirs", 2)) // comes first in the log
	if err := e.produce(t.Context(), mine); err != nil {
		t.Fatal(err)
	}
	if o, err := tr.Outcome(t.Context(), mine); err != nil || o != Lost {
		t.Fatalf("outcome of the second v2: %v, %v; want Lost", o, err)
	}

	next, err := hkafka.Record(e.cfg.Topics().Endpoints, "ep_1", record("ep_1", "https://v3", 3))
	if err != nil {
		t.Fatal(err)
	}
	tr = s.Track(next)
	if err := e.produce(t.Context(), next); err != nil {
		t.Fatal(err)
	}
	if o, err := tr.Outcome(t.Context(), next); err != nil || o != Won {
		t.Fatalf("outcome of v3: %v, %v; want Won", o, err)
	}
	s.mu.RLock()
	n := len(s.watches)
	s.mu.RUnlock()
	if n != 0 {
		t.Fatalf("%d tracked writes left behind", n)
	}
}
