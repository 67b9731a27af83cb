package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
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
		// stop: the scheduler is stopped while it starts; otherwise its
		// start fails (the parked topic's metadata).
		stop bool
	}{{name: "start fails"}, {name: "stopped while starting", stop: true}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newParkedRig(t)
			// Only the scheduler's clients may run from here on.
			r.cl.Close()
			r.rd.Close()
			before := goleak.IgnoreCurrent()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			// The scheduler asks for the parked topic's metadata alone
			// once its session exists (parkedPartitions): fail that
			// answer (and stop the scheduler first, in the second case).
			r.c.ControlKey(kmsg.Metadata.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
				m := req.(*kmsg.MetadataRequest)
				if len(m.Topics) != 1 || m.Topics[0].Topic == nil || *m.Topics[0].Topic != r.tp.Parked {
					return nil, nil, false
				}
				if tc.stop {
					cancel()
				}
				resp := m.ResponseKind().(*kmsg.MetadataResponse)
				rt := kmsg.NewMetadataResponseTopic()
				rt.Topic = m.Topics[0].Topic
				rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
				resp.Topics = append(resp.Topics, rt)
				return resp, nil, true
			})
			s, err := New(r.cfg)
			if err != nil {
				t.Fatal(err)
			}
			err = s.Run(ctx)
			if tc.stop && err != nil {
				t.Fatalf("a scheduler stopped while starting ended with %v", err)
			}
			if !tc.stop && err == nil {
				t.Fatal("a scheduler whose parked topic has no metadata started")
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
