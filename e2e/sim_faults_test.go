package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

// The fault schedule of a seed: every fault's time, kind and parameters
// are drawn before the run starts, so a seed fully determines it (the
// machine's timing still moves where in the engine's work each lands).

// simFault is one scheduled fault.
type simFault struct {
	at    time.Duration
	kind  string
	apply func(ctx context.Context, w *simWorld)
}

// The produce error classes the schedule draws from.
var simProduceErrs = []*kerr.Error{
	kerr.NotLeaderForPartition, // retriable
	kerr.RequestTimedOut,       // retriable, after the write
	kerr.MessageTooLarge,
	kerr.InvalidRecord,
	kerr.TopicAuthorizationFailed,
	kerr.PolicyViolation,
}

var simTxnErrs = []*kerr.Error{
	kerr.ConcurrentTransactions,
	kerr.NotCoordinator,
	kerr.CoordinatorLoadInProgress,
	kerr.InvalidProducerEpoch, // fenced
	kerr.UnknownServerError,
}

var simTxnKeys = []kmsg.Key{kmsg.InitProducerID, kmsg.AddPartitionsToTxn, kmsg.AddOffsetsToTxn, kmsg.EndTxn, kmsg.TxnOffsetCommit}

// drawSchedule draws the seed's faults over the fault phase, and the one
// service whose clock is skewed.
func (w *simWorld) drawSchedule(rng *rand.Rand) []simFault {
	if rng.IntN(2) == 0 {
		w.skewSlot = 1 + rng.IntN(4)
		w.skew = time.Duration(rng.Int64N(int64(6*time.Second))) - 3*time.Second
		w.counts["clock-skew"] = 1
	}
	p := w.st.kafka.TopicPrefix
	txns := []string{p + "dispatcher-1", p + "dispatcher-2", p + "dispatcher-3", p + "scheduler-1"}
	topics := []string{w.st.topics.Deliveries, w.st.topics.Retries, w.st.topics.Results, w.st.topics.Dead, w.st.topics.Notices, w.st.topics.Lanes}
	n := 5 + rng.IntN(6)
	var out []simFault
	for range n {
		at := time.Second + time.Duration(rng.Int64N(int64(w.phase-2*time.Second)))
		var f simFault
		switch k := rng.IntN(14); k {
		case 0, 1:
			txn, topic := txns[rng.IntN(len(txns))], topics[rng.IntN(len(topics))]
			e, count := simProduceErrs[rng.IntN(len(simProduceErrs))], 1+rng.IntN(3)
			f = simFault{kind: "produce-err", apply: func(_ context.Context, w *simWorld) {
				w.inject(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: e, Count: count, When: ofTxn(txn)})
				w.t.Logf("fault: %s produce to %s fails %d× with %v", txn, topic, count, e)
				w.count("produce-err", true)
				w.refused(count)
			}}
		case 2:
			txn, key := txns[rng.IntN(len(txns))], simTxnKeys[rng.IntN(len(simTxnKeys))]
			e, count := simTxnErrs[rng.IntN(len(simTxnErrs))], 1+rng.IntN(2)
			f = simFault{kind: "txn-err", apply: func(_ context.Context, w *simWorld) {
				w.inject(kfake.Fault{Keys: []kmsg.Key{key}, Err: e, Count: count, TopLevel: true, When: ofTxn(txn)})
				w.t.Logf("fault: %s %v fails %d× with %v", txn, key, count, e)
				w.count("txn-err", true)
				w.refused(count)
			}}
		case 3:
			txn, d := txns[rng.IntN(len(txns))], time.Duration(500+rng.IntN(3500))*time.Millisecond
			f = simFault{kind: "slow-produce", apply: func(_ context.Context, w *simWorld) {
				w.stall(kmsg.Produce, d, ofTxn(txn))
				w.t.Logf("fault: the next produce of %s stalls %v", txn, d)
				w.count("slow-produce", true)
			}}
		case 4:
			d := time.Duration(500+rng.IntN(2500)) * time.Millisecond
			f = simFault{kind: "fetch-stall", apply: func(_ context.Context, w *simWorld) {
				w.stall(kmsg.Fetch, d, func(kmsg.Request) bool { return true })
				w.t.Logf("fault: the next fetch stalls %v", d)
				w.count("fetch-stall", false)
			}}
		case 5:
			topic, count := []string{w.st.topics.Deliveries, w.st.topics.Lanes, w.st.topics.Endpoints}[rng.IntN(3)], 1+rng.IntN(4)
			f = simFault{kind: "fetch-err", apply: func(_ context.Context, w *simWorld) {
				w.inject(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: topic, Err: kerr.NotLeaderForPartition, Count: count})
				w.t.Logf("fault: %d fetches of %s fail NOT_LEADER", count, topic)
				w.count("fetch-err", false)
			}}
		case 6:
			// One busy partition's leader moves (its epoch bumps). Not
			// ShufflePartitionLeaders: after it, kfake answered
			// OffsetForLeaderEpoch on the compacted endpoints topic with
			// offset 0, which franz-go reports as lost records (a kfake
			// artifact; docs/reliability.md).
			topic := []string{w.st.topics.Deliveries, w.st.topics.Results}[rng.IntN(2)]
			part, node := int32(rng.IntN(3)), int32(rng.IntN(3))
			f = simFault{kind: "leader-move", apply: func(ctx context.Context, w *simWorld) {
				if err := w.moveLeader(ctx, topic, part, node); err != nil {
					w.t.Logf("move %s/%d: %v", topic, part, err)
					return
				}
				w.t.Logf("fault: the leader of %s/%d moves to node %d", topic, part, node)
				w.count("leader-move", true)
			}}
		case 7:
			f = simFault{kind: "coordinator-move", apply: func(_ context.Context, w *simWorld) {
				w.c.RehashCoordinators()
				w.t.Log("fault: group and transaction coordinators rehashed")
				w.count("coordinator-move", true)
			}}
		case 8:
			f = simFault{kind: "rebalance", apply: func(_ context.Context, w *simWorld) {
				w.inject(kfake.Fault{Keys: []kmsg.Key{kmsg.Heartbeat}, Group: w.dc.Group, Err: kerr.RebalanceInProgress, Count: 1, TopLevel: true})
				w.model.ownershipMayChange(simSession + 5*time.Second)
				w.t.Log("fault: the dispatchers' group rebalances")
				w.count("rebalance", true)
			}}
		case 9:
			slot, back := rng.IntN(3), time.Duration(500+rng.IntN(3500))*time.Millisecond
			f = simFault{kind: "dispatcher-crash", apply: func(ctx context.Context, w *simWorld) { w.crashDispatcher(ctx, slot, back) }}
		case 10:
			slot := rng.IntN(3)
			f = simFault{kind: "dispatcher-join-leave", apply: func(_ context.Context, w *simWorld) { w.joinOrLeave(slot) }}
		case 11:
			slot := rng.IntN(3)
			d := simSession + time.Duration(1000+rng.IntN(3000))*time.Millisecond
			rejoin := w.drawRejoinOnThaw() // a stream of its own (sim_expelled_test.go)
			f = simFault{kind: "dispatcher-pause", apply: func(ctx context.Context, w *simWorld) { w.pauseDispatcher(ctx, slot, d, rejoin) }}
		case 12:
			back := time.Duration(500+rng.IntN(3500)) * time.Millisecond
			f = simFault{kind: "scheduler-crash", apply: func(ctx context.Context, w *simWorld) { w.crashScheduler(ctx, back) }}
		default:
			ep, d, pause := w.eps[rng.IntN(len(w.eps))], time.Duration(500+rng.IntN(3000))*time.Millisecond, rng.IntN(2) == 0
			cap := []uint32{1, 3, 8}[rng.IntN(3)]
			f = simFault{kind: "endpoint-change", apply: func(ctx context.Context, w *simWorld) { w.changeEndpoint(ctx, ep, pause, d, cap) }}
		}
		f.at = at
		out = append(out, f)
	}
	return out
}

// ofTxn matches the requests the transactional producer txn sends,
// read from the request itself: kfake's TxnID selector also matched
// another producer's EndTxn (seen: the scheduler fenced by a fault meant
// for a dispatcher).
func ofTxn(txn string) func(kmsg.Request) bool {
	return func(r kmsg.Request) bool {
		switch r := r.(type) {
		case *kmsg.ProduceRequest:
			return r.TransactionID != nil && *r.TransactionID == txn
		case *kmsg.InitProducerIDRequest:
			return r.TransactionalID != nil && *r.TransactionalID == txn
		case *kmsg.AddPartitionsToTxnRequest:
			if r.TransactionalID == txn {
				return true
			}
			for _, t := range r.Transactions {
				if t.TransactionalID == txn {
					return true
				}
			}
		case *kmsg.AddOffsetsToTxnRequest:
			return r.TransactionalID == txn
		case *kmsg.TxnOffsetCommitRequest:
			return r.TransactionalID == txn
		case *kmsg.EndTxnRequest:
			return r.TransactionalID == txn
		}
		return false
	}
}

func (w *simWorld) inject(f kfake.Fault) {
	h := w.c.Fault(f)
	w.mu.Lock()
	w.handles = append(w.handles, h)
	w.mu.Unlock()
}

// stall holds the next request of key that match accepts for d, then
// lets the broker answer it.
func (w *simWorld) stall(key kmsg.Key, d time.Duration, match func(kmsg.Request) bool) {
	w.c.ControlKey(int16(key), func(r kmsg.Request) (kmsg.Response, error, bool) {
		if !match(r) {
			w.c.KeepControl()
			return nil, nil, false
		}
		w.c.DropControl()
		tm := time.NewTimer(d)
		w.c.SleepControl(func() { <-tm.C })
		return nil, nil, false
	})
}

// crashDispatcher stops a running dispatcher as kill -9 would: from the
// moment of the crash nothing it sends lands (its produce and
// transaction requests fail, it does not leave the group: its
// partitions wait for the session timeout), then it restarts after back.
func (w *simWorld) crashDispatcher(ctx context.Context, slot int, back time.Duration) {
	w.mu.Lock()
	s := w.slots[slot]
	if !s.up {
		w.mu.Unlock()
		return
	}
	txn := fmt.Sprintf("%sdispatcher-%d", w.st.kafka.TopicPrefix, s.n)
	w.mu.Unlock()
	w.count("dispatcher-crash", true)
	w.model.ownershipMayChange(back + simSession + 5*time.Second)
	w.t.Logf("fault: dispatcher-%d crashes; back in %v", s.n, back)
	dead := w.c.Fault(
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce, kmsg.AddPartitionsToTxn, kmsg.AddOffsetsToTxn, kmsg.TxnOffsetCommit, kmsg.EndTxn}, Err: kerr.InvalidProducerEpoch, Count: -1, TopLevel: true, When: ofTxn(txn)},
		kfake.Fault{Keys: []kmsg.Key{kmsg.LeaveGroup}, Group: w.dc.Group, Err: kerr.UnknownMemberID, Count: 1, TopLevel: true},
	)
	s.freeze.thaw()
	s.svc.halt()
	dead.Remove()
	w.mu.Lock()
	s.up = false
	w.mu.Unlock()
	if !sleepUntil(ctx, time.Now().Add(back)) {
		return // heal restarts what the phase left down
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !s.up {
		w.startDispatcher(s)
	}
}

// joinOrLeave starts slot when it is down (a dispatcher joins: a
// rebalance between live members), else stops it gracefully (drain,
// commit, leave) when another stays up.
func (w *simWorld) joinOrLeave(slot int) {
	w.mu.Lock()
	s := w.slots[slot]
	if !s.up {
		w.startDispatcher(s)
		w.mu.Unlock()
		w.model.ownershipMayChange(simSession + 5*time.Second)
		w.t.Logf("fault: dispatcher-%d joins", s.n)
		w.count("dispatcher-join", true)
		return
	}
	up := 0
	for _, o := range w.slots {
		if o.up {
			up++
		}
	}
	w.mu.Unlock()
	if up < 2 {
		return
	}
	w.model.ownershipMayChange(simSession + 5*time.Second)
	w.t.Logf("fault: dispatcher-%d leaves (drain)", s.n)
	w.count("dispatcher-leave", true)
	s.svc.halt()
	w.mu.Lock()
	s.up = false
	w.mu.Unlock()
}

// pauseDispatcher freezes a running dispatcher's Kafka links for d
// (beyond the session timeout): its heartbeats stop, the group gives its
// partitions away, while its attempts in flight go on; then it resumes
// as a zombie owner whose next commit must be fenced. With rejoin, its
// thaw meets a rebalance (sim_expelled_test.go).
func (w *simWorld) pauseDispatcher(ctx context.Context, slot int, d time.Duration, rejoin bool) {
	w.mu.Lock()
	s := w.slots[slot]
	up := s.up
	w.mu.Unlock()
	if !up {
		return
	}
	w.count("dispatcher-pause", true)
	w.model.ownershipMayChange(d + simSession + 5*time.Second)
	w.t.Logf("fault: dispatcher-%d's Kafka links freeze for %v", s.n, d)
	s.freeze.freeze()
	sleepUntil(ctx, time.Now().Add(d))
	if rejoin {
		name := fmt.Sprint("dispatcher-", s.n)
		w.rejoinOnThaw("pause-then-rejoin", w.dc.Group, simClientID(name), w.dispatcherInstance(s.n), name)
	}
	s.freeze.thaw()
}

func (w *simWorld) crashScheduler(ctx context.Context, back time.Duration) {
	w.mu.Lock()
	if !w.schedUp {
		w.mu.Unlock()
		return
	}
	w.schedUp = false
	w.mu.Unlock()
	w.count("scheduler-crash", true)
	w.t.Logf("fault: the scheduler crashes; back in %v", back)
	dead := w.c.Fault(
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce, kmsg.AddPartitionsToTxn, kmsg.AddOffsetsToTxn, kmsg.TxnOffsetCommit, kmsg.EndTxn}, Err: kerr.InvalidProducerEpoch, Count: -1, TopLevel: true, When: ofTxn(w.sc.TransactionalID)},
		kfake.Fault{Keys: []kmsg.Key{kmsg.LeaveGroup}, Group: w.sc.Group, Err: kerr.UnknownMemberID, Count: 1, TopLevel: true},
	)
	w.sched.halt()
	dead.Remove()
	if !sleepUntil(ctx, time.Now().Add(back)) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.schedUp {
		w.startScheduler()
	}
}

// changeEndpoint pauses ep for d then resumes it, or changes its cap.
func (w *simWorld) changeEndpoint(ctx context.Context, ep *simEndpoint, pause bool, d time.Duration, cap uint32) {
	if pause {
		w.count("endpoint-pause", false)
		w.t.Logf("fault: %s paused for %v", ep.name, d)
		if _, err := w.st.endpoints().PauseEndpoint(w.st.ctx(), &hooklinev1.PauseEndpointRequest{Id: ep.id, Reason: "sim"}); err != nil {
			w.t.Logf("pause %s: %v", ep.name, err)
		}
		sleepUntil(ctx, time.Now().Add(d))
		if _, err := w.st.endpoints().ResumeEndpoint(w.st.ctx(), &hooklinev1.ResumeEndpointRequest{Id: ep.id}); err != nil {
			w.t.Logf("resume %s: %v", ep.name, err)
		}
		return
	}
	if ep.ordering == hooklinev1.Ordering_ORDERING_PER_ENDPOINT {
		return
	}
	w.count("endpoint-update", false)
	w.t.Logf("fault: %s max_in_flight %d → %d", ep.name, ep.maxInFlight, cap)
	w.model.mu.Lock()
	old := ep.maxInFlight
	ep.maxInFlight = max(old, cap) // both caps may apply until every dispatcher has the change
	w.model.mu.Unlock()
	if _, err := w.st.endpoints().UpdateEndpoint(w.st.ctx(), &hooklinev1.UpdateEndpointRequest{
		Endpoint:   &hooklinev1.Endpoint{Id: ep.id, MaxInFlight: cap},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"max_in_flight"}},
	}); err != nil {
		w.t.Logf("update %s: %v", ep.name, err)
		return
	}
	if sleepUntil(ctx, time.Now().Add(3*time.Second)) {
		w.model.mu.Lock()
		ep.maxInFlight = cap
		w.model.mu.Unlock()
	}
}

// kafkaFreeze is one process's Kafka links, which the simulation can
// freeze (a SIGSTOP of its Kafka side: nothing it sends leaves and
// nothing it is sent arrives) and thaw. Safe for concurrent use.
type kafkaFreeze struct {
	mu   sync.Mutex
	gate chan struct{} // closed while thawed
}

func newKafkaFreeze() *kafkaFreeze {
	g := make(chan struct{})
	close(g)
	return &kafkaFreeze{gate: g}
}

func (f *kafkaFreeze) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.gate:
		f.gate = make(chan struct{})
	default:
	}
}

func (f *kafkaFreeze) thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.gate:
	default:
		close(f.gate)
	}
}

func (f *kafkaFreeze) wait() {
	f.mu.Lock()
	g := f.gate
	f.mu.Unlock()
	<-g
}

func (f *kafkaFreeze) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	f.wait()
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &frozenConn{Conn: c, f: f}, nil
}

type frozenConn struct {
	net.Conn
	f *kafkaFreeze
}

func (c *frozenConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.f.wait()
	return n, err
}

func (c *frozenConn) Write(b []byte) (int, error) {
	c.f.wait()
	return c.Conn.Write(b)
}

// simEpochTxn is the transactional id of the producer that starts each
// moved partition's new leader epoch (moveLeader); the storm detectors
// do not count its aborts.
const simEpochTxn = "sim-epoch-marker"

// moveLeader moves topic/part's leadership to node, as a broker failover
// does, so that the new leader epoch starts where Kafka's would.
//
// kfake's MoveTopicPartition bumps the epoch without recording where it
// starts (Kafka's leader-epoch cache does): until a batch is written in
// the new epoch, it answers an OffsetForLeaderEpoch for the old one with
// offset -1, which franz-go takes for a truncated log; it reports lost
// records and resets the consumer to its reset offset (seen: ingest's
// follower of deliveries/1 ended with "lost records; the client
// consumed to offset 20 epoch 0 but was reset to offset 0", a failure of
// kfake, not of Hookline: on Kafka the same request answers the offset
// the new epoch starts at). So every OffsetForLeaderEpoch is held from
// just before the move until a batch is in the new epoch: one record in
// a transaction that is aborted, which no reader sees (every reader of
// these topics reads committed).
func (w *simWorld) moveLeader(ctx context.Context, topic string, part, node int32) error {
	return moveLeaderMarked(ctx, w.c, w.st.kafka.TopicPrefix+simEpochTxn, topic, part, node)
}

// moveLeaderMarked is moveLeader on cluster c, its epoch marker written
// by the transactional id txn.
func moveLeaderMarked(ctx context.Context, c *kfake.Cluster, txn, topic string, part, node int32) error {
	marked := make(chan struct{})
	var once sync.Once
	mark := func() { once.Do(func() { close(marked) }) }
	defer mark()
	c.ControlKey(int16(kmsg.OffsetForLeaderEpoch), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		select {
		case <-marked:
			c.DropControl()
		default:
			c.SleepControl(func() { <-marked })
		}
		return nil, nil, false
	})
	if err := c.MoveTopicPartition(topic, part, node); err != nil {
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...),
		kgo.TransactionalID(txn),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		return fmt.Errorf("epoch marker: %w", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: part, Value: []byte("sim: aborted epoch marker")}).FirstErr(); err != nil {
		return fmt.Errorf("epoch marker: %w", err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		return fmt.Errorf("epoch marker: %w", err)
	}
	return nil
}
