package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
)

// A session that ends while it starts leaves the group with it: a
// scheduler whose start fails after its group session has joined must
// not leave a live member behind, holding partitions it never polls
// (docs/DESIGN.md I46). Found by make sim seed 1: the member of a
// scheduler stopped while starting went on heartbeating, and the
// retries on its partitions never came back.
func TestASessionThatFailsWhileStartingLeavesTheGroup(t *testing.T) {
	for _, tc := range []struct {
		name string
		// after: how many failed metadata requests naming the parked
		// topic the scheduler is stopped after (it waits for one that
		// answers: TestASessionWaitsForTheParkedTopicsMetadata).
		after int
	}{{name: "stopped while starting", after: 1}, {name: "stopped while its metadata read fails", after: 3}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newParkedRig(t)
			// Only the scheduler's clients may run from here on.
			r.cl.Close()
			r.rd.Close()
			before := goleak.IgnoreCurrent()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			// The parked topic's metadata never answers: the session
			// exists (only its reads name the topic) and cannot start.
			f := failParkedMetadata(r, -1)
			go func() {
				if f.Wait(ctx, tc.after) == nil {
					cancel()
				}
			}()
			s, err := New(r.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Run(ctx); err != nil {
				t.Fatalf("a scheduler stopped while starting ended with %v", err)
			}
			// Run has returned: every client it made is closed, so none
			// goes on to join (or heartbeat in) the scheduler's group.
			// A closed client's goroutines end within moments; one that
			// nobody closed keeps its own forever.
			deadline := time.Now().Add(15 * time.Second)
			for {
				err := goleak.Find(before)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the scheduler returned and left a client running: %v", err)
				}
			}
		})
	}
}

// TestASessionWaitsForTheParkedTopicsMetadata: a session that begins
// while a broker is down (a new one after a hop whose end's outcome was
// unknown) reads the parked topic's metadata until it answers, and goes
// on. On main the first failed read ended the process: in make chaos's
// kill-broker row scheduler-0 exited with "scheduler: parked topic
// metadata: broker closed the connection".
func TestASessionWaitsForTheParkedTopicsMetadata(t *testing.T) {
	r := newParkedRig(t)
	// The parked topic answers UNKNOWN_TOPIC_OR_PARTITION in the next
	// three metadata requests that name it among at most three topics:
	// the session's own reads (ensureTopics names every topic, and ran).
	const faults = 3
	f := failParkedMetadata(r, faults)
	s, err := New(r.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx) }()
	deadline := time.After(30 * time.Second)
	for {
		if ok, _ := s.Probe().Ready(ctx); ok && f.Hits() >= faults {
			break
		}
		select {
		case err := <-ran:
			t.Fatalf("the scheduler ended while its parked topic's metadata failed: %v", err)
		case <-deadline:
			t.Fatalf("the scheduler was not ready after its parked topic's metadata failed %d times and answered", f.Hits())
		case <-time.After(50 * time.Millisecond):
		}
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatalf("the scheduler ended with %v", err)
	}
}

// failParkedMetadata answers UNKNOWN_TOPIC_OR_PARTITION for the parked
// topic in the next count (-1: every) metadata requests that name it
// among at most three topics: the scheduler session's own reads
// (parkedPartitions, and its consumer's, which would otherwise fill the
// client's metadata cache), not ensureTopics', which names every topic.
func failParkedMetadata(r *parkedRig, count int) *kfake.FaultHandle {
	return r.c.Fault(kfake.Fault{
		Keys:  []kmsg.Key{kmsg.Metadata},
		Topic: r.tp.Parked,
		Err:   kerr.UnknownTopicOrPartition,
		Count: count,
		When: func(req kmsg.Request) bool {
			m, ok := req.(*kmsg.MetadataRequest)
			return ok && len(m.Topics) > 0 && len(m.Topics) <= 3
		},
	})
}
