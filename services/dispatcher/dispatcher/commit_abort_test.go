package dispatcher

import (
	"errors"
	"fmt"
	"testing"

	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestACommitWithoutAPartitionWhoseOutputsItCarriesAborts (issue 24 item
// 8): a partition with outputs in the transaction that is missing from
// the offset commit (revoked after the commit was built) fails the hook
// with REBALANCE_IN_PROGRESS, so the session aborts: its outputs never
// commit without its offset.
func TestACommitWithoutAPartitionWhoseOutputsItCarriesAborts(t *testing.T) {
	req := polledTo1000()
	marks := map[string]map[int32]kgo.EpochOffset{"d": {0: {Offset: 17}, 1: {Offset: 40}}}
	revoked := func(hkafka.TopicPartition) bool { return false }
	err := atWatermarks(req, marks, []hkafka.TopicPartition{{Topic: "d", Partition: 0}, {Topic: "d", Partition: 1}}, revoked)
	if !errors.Is(err, kerr.RebalanceInProgress) {
		t.Fatalf("hook error %v; want one wrapping REBALANCE_IN_PROGRESS", err)
	}
}

// TestACommitNamesTheOffsetOfAnOwnedPartitionTheSessionLeftOut (issue 23,
// make sim seeds 9 and 24): after an aborted commit the session leaves
// out of its offset commit every partition not polled since, and a full
// window polls nothing. A partition whose outputs the transaction
// carries and which the window still owns is added at its watermark, of
// a topic in the request or not; the commit goes on.
func TestACommitNamesTheOffsetOfAnOwnedPartitionTheSessionLeftOut(t *testing.T) {
	req := polledTo1000()
	marks := map[string]map[int32]kgo.EpochOffset{"d": {0: {Offset: 17}, 1: {Epoch: 2, Offset: 40}}, "e": {3: {Epoch: 5, Offset: 9}}}
	parts := []hkafka.TopicPartition{{Topic: "d", Partition: 0}, {Topic: "d", Partition: 1}, {Topic: "e", Partition: 3}}
	owned := func(hkafka.TopicPartition) bool { return true }
	if err := atWatermarks(req, marks, parts, owned); err != nil {
		t.Fatal(err)
	}
	got := map[string]kgo.EpochOffset{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			got[fmt.Sprint(t.Topic, "/", p.Partition)] = kgo.EpochOffset{Epoch: p.LeaderEpoch, Offset: p.Offset}
		}
	}
	want := map[string]kgo.EpochOffset{"d/0": {Offset: 17}, "d/1": {Epoch: 2, Offset: 40}, "e/3": {Epoch: 5, Offset: 9}}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(req.Topics) != 2 {
		t.Fatalf("offset commit %v in %d topics, want %v in 2", got, len(req.Topics), want)
	}
}

// TestACommitKafkaAbortedKeepsTheWorkOfThePartitionsStillOwned (issue
// 24 item 8): a commit aborted by Kafka (a rebalance, no record refused)
// puts what it popped back, lane changes included; the records fetched
// again from the rewound session are skipped, nothing is attempted
// again, and the next commit writes the same outputs. A partition
// revoked meanwhile loses its work (its next owner redoes it).
func TestACommitKafkaAbortedKeepsTheWorkOfThePartitionsStillOwned(t *testing.T) {
	f := newBlockFixture(t)
	f.publish(t, "a", 0, 0)
	f.publish(t, "b", 0, 1)
	f.e.runDry(t)
	posts := len(f.rx.received())
	e := f.e
	var first []*kgo.Record
	for _, pw := range e.w.parts {
		first, _, _ = e.w.popDone(pw, e.s.now(), first)
	}
	first = e.c.lanes.outputs(first)
	if err := e.endCommit(t, msg{kind: msgCommitted}); err != nil {
		t.Fatal(err)
	}
	_ = e.endCommit(t, msg{kind: msgCommitted, produceErr: errBackoffEnded})
	// The rewound session fetches both records again.
	f.publish(t, "a", 0, 0)
	f.publish(t, "b", 0, 1)
	f.e.runDry(t)
	again := e.commitNow()
	if got := len(f.rx.received()); got != posts {
		t.Fatalf("%d POSTs after the abort, want %d: completed work was attempted again", got, posts)
	}
	topics := func(rs []*kgo.Record) map[string]int {
		m := map[string]int{}
		for _, r := range rs {
			m[r.Topic]++
		}
		return m
	}
	if a, b := topics(first), topics(again); len(first) == 0 || fmt.Sprint(a) != fmt.Sprint(b) || b[e.s.topics.Lanes] != 1 {
		t.Fatalf("after the abort the commit writes %v, want what the aborted one wrote, %v, lane a's record included", b, a)
	}
}

// endCommit hands the loop m, a commit's end, as the commit's goroutine
// posts it, and has the loop take it (collect). A transaction's end was
// counted out when the commit began (dispatch), a backoff's end when
// collect took the abort.
func (e *engine) endCommit(t testing.TB, m msg) error {
	t.Helper()
	if !errors.Is(m.produceErr, errBackoffEnded) {
		e.outstanding++ // as dispatch counts a transaction begun
	}
	e.in.post(m)
	return e.collect(e.s.now())
}

// polledTo1000 is an offset commit as the session builds it when only
// partition d/0 was polled (to offset 1000).
func polledTo1000() *kmsg.TxnOffsetCommitRequest {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "d"
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, 1000
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// TestACommitNamingAPartitionDroppedSinceItWasBuiltAborts (make sim
// seed 43, two terminal results): a partition the session's request
// names but whose window a loss dropped after the commit was built
// (the session rejoined while the commit's End waited) fails the hook
// with REBALANCE_IN_PROGRESS: its outputs and its old watermark are its
// next owner's to write.
func TestACommitNamingAPartitionDroppedSinceItWasBuiltAborts(t *testing.T) {
	req := polledTo1000()
	marks := map[string]map[int32]kgo.EpochOffset{"d": {0: {Offset: 17}, 1: {Offset: 40}}}
	lost := func(p hkafka.TopicPartition) bool { return p.Partition != 0 }
	err := atWatermarks(req, marks, nil, lost)
	if !errors.Is(err, kerr.RebalanceInProgress) {
		t.Fatalf("hook error %v; want one wrapping REBALANCE_IN_PROGRESS", err)
	}
}

// TestAWindowCountsWhatItsCommitInFlightPopped: what a commit popped
// stays in memory until the commit ends, so it keeps counting against
// the window's budget: polls do not refill the window meanwhile, and an
// abort that puts it back (keepTxn) leaves the window within its budget
// and one poll. Before, popped entries left the charge at once: make sim
// seed 48 (a budget of 15, polls of 4, seven aborts) held 42
// deliveries, and each abort in a row could add up to a window more.
func TestAWindowCountsWhatItsCommitInFlightPopped(t *testing.T) {
	f := newBlockFixture(t)
	e := f.e
	e.w.maxRecords = 2
	f.publish(t, "a", 0, 0)
	f.publish(t, "b", 0, 1)
	f.e.runDry(t)
	if !e.w.full() {
		t.Fatal("the window is not full with 2 deliveries and a budget of 2")
	}
	e.c.popAll(e.s.now())
	if records, _ := e.w.held(); !e.w.full() || records != 2 {
		t.Fatalf("with a commit in flight that popped both deliveries the window holds %d records, full %v; want 2, full (they are in memory until it ends)", records, e.w.full())
	}
	if err := e.endCommit(t, msg{kind: msgCommitted}); err != nil { // aborted: kept
		t.Fatal(err)
	}
	if records, _ := e.w.held(); records != 2 {
		t.Fatalf("after the abort put its work back the window holds %d records; want 2", records)
	}
	_ = e.endCommit(t, msg{kind: msgCommitted, produceErr: errBackoffEnded})
	e.c.popAll(e.s.now())
	if err := e.endCommit(t, msg{kind: msgCommitted, committed: true}); err != nil {
		t.Fatal(err)
	}
	if records, bytes := e.w.held(); records != 0 || bytes != 0 || e.w.full() {
		t.Fatalf("after the commit landed the window holds %d records, %d bytes; want nothing", records, bytes)
	}
}
