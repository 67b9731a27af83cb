package e2e

import (
	"os"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Regression cases of make sim: a seed's finding, made deterministic
// with the simulation's own world, model and checker (docs/reliability.md,
// "Simulation", the table of seeds and what they found). They run in
// the e2e suite on kfake, without HOOKLINE_SIM.

// TestSimTakesALaneMemberSetAsideByARefusedLanesRecordAsEnded is seed
// 5's finding. A broker refuses the lanes record that takes a head
// outside (MESSAGE_TOO_LARGE); the commit aborts, the dispatcher blames
// the lane's last member outside (the head), and when the head's record
// comes again it is set aside: FAILED with a dead letter, without an
// attempt, and the lane goes on. That is the engine's answer to a record
// Kafka will not take (produce.go), and its followers may then start;
// the checker must count the head ended when it was set aside, not as a
// stall whose followers broke O1.
func TestSimTakesALaneMemberSetAsideByARefusedLanesRecordAsEnded(t *testing.T) {
	if v := os.Getenv(envKafka); v != "" && v != "kfake" {
		t.Skip("injects faults through kfake")
	}
	w := newSimWorld(t, 5, 10*time.Second, 1)
	ep := &simEndpoint{name: "ep0", ordering: hooklinev1.Ordering_ORDERING_PER_KEY, keys: 1, maxAttempts: 3, maxInFlight: 4}
	w.eps = []*simEndpoint{ep}
	head := &simMember{ep: ep, key: "k1", size: 200, plan: []simStep{sim500, simOK}}
	next := &simMember{ep: ep, key: "k1", size: 200, plan: []simStep{simOK}}
	w.members = []*simMember{head, next}
	w.placeMembers()
	w.serve()

	// The first lanes record dispatcher-1 writes is the head's going
	// outside (its retry): refused once, for what it is.
	refused := w.c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: w.st.topics.Lanes, Err: kerr.MessageTooLarge, Count: 1,
		When: ofTxn(w.st.kafka.TopicPrefix + "dispatcher-1")})
	w.count("produce-err", true)
	w.mu.Lock()
	w.startDispatcher(w.slots[0])
	w.startScheduler()
	w.mu.Unlock()
	w.publishAll(t.Context(), time.Now())
	if !head.accepted || !next.accepted {
		t.Fatal("a publish failed")
	}

	deadline := time.Now().Add(waitFor)
	for {
		terminal := w.terminalStates()
		if len(terminal[head.deliveryID]) > 0 && len(terminal[next.deliveryID]) > 0 {
			if got := terminal[head.deliveryID]; len(got) != 1 || got[0] != hooklinev1.DeliveryState_DELIVERY_STATE_FAILED {
				t.Fatalf("the head's terminal results: %v, want one FAILED (set aside)", got)
			}
			if got := terminal[next.deliveryID]; len(got) != 1 || got[0] != hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED {
				t.Fatalf("the follower's terminal results: %v, want one DELIVERED", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no terminal results for both members within %v: %v", waitFor, terminal)
		}
	}
	if refused.Hits() == 0 {
		t.Fatal("the lanes record was never refused: the scenario did not happen")
	}
	w.model.mu.Lock()
	posts := head.posts
	w.model.mu.Unlock()
	if posts != 1 {
		t.Fatalf("the head got %d POSTs, want 1 (its 500; set aside when its record came again)", posts)
	}

	r := w.check()
	if r.violations() > 0 {
		t.Fatalf("the checker found %d violations (lost %d, order %d, stalls %d, storms %d, other %d): %v",
			r.violations(), r.lost, r.order, r.stalls, r.storms, r.other, r.notes)
	}
}

// TestSimAMemberTheSchedulerSetsAsideReleasesItsLane is seed 12's
// finding (make sim SEEDS=1..16). A per_endpoint head's retry is
// refused as too large when the scheduler releases it to the deliveries
// topic; the scheduler sets it aside (FAILED, a dead letter). The
// dispatcher that owns the lane held it outside, waiting for its way
// back until its due time plus --max-hold (72 h by default), and every
// later member of the lane waited behind it, going round the retry path
// with no attempt; the set-aside now releases the lane (LANE_OP_RELEASE).
// The checker then sees the head end where it was set aside.
func TestSimAMemberTheSchedulerSetsAsideReleasesItsLane(t *testing.T) {
	if v := os.Getenv(envKafka); v != "" && v != "kfake" {
		t.Skip("injects faults through kfake")
	}
	w := newSimWorld(t, 12, 10*time.Second, 1)
	ep := &simEndpoint{name: "ep0", ordering: hooklinev1.Ordering_ORDERING_PER_ENDPOINT, maxAttempts: 3}
	w.eps = []*simEndpoint{ep}
	head := &simMember{ep: ep, size: 200, plan: []simStep{sim500, simOK}}
	next := &simMember{ep: ep, size: 200, plan: []simStep{simOK}}
	w.members = []*simMember{head, next}
	w.placeMembers()
	w.serve()

	// The scheduler's first produce to the deliveries topic is the
	// head's release: refused once, for what it is.
	refused := w.c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: w.st.topics.Deliveries, Err: kerr.MessageTooLarge, Count: 1,
		When: ofTxn(w.st.kafka.TopicPrefix + "scheduler-1")})
	w.count("produce-err", true)
	w.mu.Lock()
	w.startDispatcher(w.slots[0])
	w.startScheduler()
	w.mu.Unlock()
	w.publishAll(t.Context(), time.Now())
	if !head.accepted || !next.accepted {
		t.Fatal("a publish failed")
	}
	deadline := time.Now().Add(waitFor)
	for {
		terminal := w.terminalStates()
		if len(terminal[next.deliveryID]) > 0 {
			if got := terminal[head.deliveryID]; len(got) != 1 || got[0] != hooklinev1.DeliveryState_DELIVERY_STATE_FAILED {
				t.Fatalf("the head's terminal results: %v, want one FAILED (set aside by the scheduler)", got)
			}
			if got := terminal[next.deliveryID]; len(got) != 1 || got[0] != hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED {
				t.Fatalf("the follower's terminal results: %v, want one DELIVERED", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the follower has no terminal result %v after its head (terminal results %v) was set aside (refusals injected: %d)",
				waitFor, terminal[head.deliveryID], refused.Hits())
		}
	}
	if refused.Hits() == 0 {
		t.Fatal("the release was never refused: the scenario did not happen")
	}
	r := w.check()
	if r.violations() > 0 {
		t.Fatalf("the checker found %d violations (lost %d, order %d, stalls %d, storms %d, other %d): %v",
			r.violations(), r.lost, r.order, r.stalls, r.storms, r.other, r.notes)
	}
}
