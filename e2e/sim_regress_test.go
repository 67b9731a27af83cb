package e2e

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
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

// TestSimAMemberExpelledForItsSessionCommitsNothingItNoLongerOwned is
// seed 61's finding (two terminal results for 18 deliveries). A
// dispatcher's Kafka links freeze as its attempts begin, for longer than
// its session: its receivers answer, its commit cannot. The group
// expels it and gives its partitions to a second dispatcher, which
// attempts the same deliveries again and commits them. When the links
// thaw, the first one's heartbeat is answered REBALANCE_IN_PROGRESS (the
// group is rebalancing as it returns), so franz-go joins again rather
// than losing its partitions; its old member id is unknown, it joins as
// a new member, and the new assignment is diffed against what it
// believed it owned: a revoke, whose hand-off used to commit the stale
// window under the new member id (Kafka checks the member, not who owns
// the partitions). Now the session ends when its member id changes
// without a loss, and no commit under another member carries its work
// (hkafka.Membership): every delivery has exactly one terminal result.
// Dynamic and static members both.
func TestSimAMemberExpelledForItsSessionCommitsNothingItNoLongerOwned(t *testing.T) {
	if v := os.Getenv(envKafka); v != "" && v != "kfake" {
		t.Skip("injects faults through kfake")
	}
	for _, static := range []bool{false, true} {
		t.Run(map[bool]string{false: "dynamic", true: "static"}[static], func(t *testing.T) {
			w := newSimWorld(t, 61, 10*time.Second, 1)
			if static {
				w.dc.GroupInstanceID = w.st.kafka.TopicPrefix + "dispatcher-"
			}
			for i := range 3 {
				ep := &simEndpoint{name: fmt.Sprint("ep", i), ordering: hooklinev1.Ordering_ORDERING_UNORDERED, maxAttempts: 3, maxInFlight: 10}
				w.eps = append(w.eps, ep)
				for range 6 {
					w.members = append(w.members, &simMember{ep: ep, size: 200, plan: []simStep{simOK}})
				}
			}
			w.placeMembers()
			w.serve()

			// One commit a while: what dispatcher-1 completes before its
			// links freeze is not committed yet.
			w.dc.CommitInterval = 5 * time.Second

			// dispatcher-1's member id, from its first SyncGroup (it is the
			// group's only member then).
			var mu sync.Mutex
			var first string
			w.c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.SyncGroup}, Observe: true, Count: -1, When: func(r kmsg.Request) bool {
				if hb, ok := r.(*kmsg.SyncGroupRequest); ok && hb.Group == w.dc.Group {
					mu.Lock()
					if first == "" {
						first = hb.MemberID
					}
					mu.Unlock()
				}
				return false
			}})
			w.publishAll(t.Context(), time.Now())
			for _, m := range w.members {
				if !m.accepted {
					t.Fatal("a publish failed")
				}
			}
			// The links freeze as dispatcher-1's last attempt begins.
			one := w.slots[0]
			var began atomic.Int32
			var froze atomic.Bool
			w.onAttempt = func(s *simSlot) {
				if s == one && began.Add(1) == int32(len(w.members)) {
					s.freeze.freeze()
					froze.Store(true)
				}
			}
			w.mu.Lock()
			w.startDispatcher(one)
			w.startScheduler()
			w.mu.Unlock()
			deadline := time.Now().Add(waitFor)
			answered := func() int {
				w.model.mu.Lock()
				defer w.model.mu.Unlock()
				n := 0
				for _, m := range w.members {
					if !m.ended.IsZero() {
						n++
					}
				}
				return n
			}
			for !froze.Load() || answered() < len(w.members) {
				if time.Now().After(deadline) {
					t.Fatalf("dispatcher-1's receivers answered %d of %d deliveries within %v", answered(), len(w.members), waitFor)
				}
				time.Sleep(20 * time.Millisecond)
			}
			mu.Lock()
			old := first
			mu.Unlock()
			if old == "" {
				t.Fatal("dispatcher-1 never heartbeated before its links froze")
			}
			// The group expels it; dispatcher-2 takes every partition and
			// commits the deliveries again.
			w.mu.Lock()
			w.startDispatcher(w.slots[1])
			w.mu.Unlock()
			for {
				terminal := w.terminalStates()
				if len(terminal) == len(w.members) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("dispatcher-2 ended %d of %d deliveries within %v", len(terminal), len(w.members), waitFor)
				}
			}
			// Its old member's next heartbeat: a rebalance, not a loss.
			rejoin := w.c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Heartbeat}, Err: kerr.RebalanceInProgress, Count: 1, TopLevel: true, When: func(r kmsg.Request) bool {
				hb, ok := r.(*kmsg.HeartbeatRequest)
				return ok && hb.MemberID == old
			}})
			one.freeze.thaw()
			// dispatcher-1 rejoins, and what it then commits is read.
			for rejoin.Hits() == 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if rejoin.Hits() == 0 {
				t.Fatal("dispatcher-1's old member never heartbeated after the thaw: the scenario did not happen")
			}
			// dispatcher-1 is back once the group is stable with both
			// members: its rejoin's hand-off (and the commit it used to
			// make) came before that.
			for {
				described, err := w.st.admin.DescribeGroups(t.Context(), w.dc.Group)
				if g, ok := described[w.dc.Group]; err == nil && ok && g.State == "Stable" && len(g.Members) == 2 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the group did not settle with both dispatchers within %v: %v", waitFor, described)
				}
				time.Sleep(50 * time.Millisecond)
			}
			terminal := w.terminalStates()
			for _, m := range w.members {
				if got := terminal[m.deliveryID]; len(got) != 1 {
					t.Errorf("%s: %d terminal results %v, want 1", m.deliveryID, len(got), got)
				}
			}
		})
	}
}
