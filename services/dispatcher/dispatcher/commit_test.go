package dispatcher

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCommitRequestIsRewrittenToTheWatermarks: each partition's committed
// offset is its watermark, not what was polled, and a partition the
// window no longer holds is left out.
func TestCommitRequestIsRewrittenToTheWatermarks(t *testing.T) {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	for _, topic := range []string{"d", "other"} {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = topic
		for p := range int32(3) {
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p, 1000 // polled up to here
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	marks := map[string]map[int32]kgo.EpochOffset{"d": {0: {Epoch: 3, Offset: 17}, 2: {Epoch: 4, Offset: 900}}}
	if err := atWatermarks(req, marks, []hkafka.TopicPartition{{Topic: "d", Partition: 0}}); err != nil {
		t.Fatal(err)
	}
	if len(req.Topics) != 1 || req.Topics[0].Topic != "d" {
		t.Fatalf("topics %+v, want only d", req.Topics)
	}
	got := map[int32]int64{}
	for _, p := range req.Topics[0].Partitions {
		got[p.Partition] = p.Offset
		if want := marks["d"][p.Partition].Epoch; p.LeaderEpoch != want {
			t.Fatalf("partition %d epoch %d, want %d", p.Partition, p.LeaderEpoch, want)
		}
	}
	if len(got) != 2 || got[0] != 17 || got[2] != 900 {
		t.Fatalf("offsets %v, want {0:17 2:900}", got)
	}
}

// TestACommitWithoutAPartitionWhoseOutputsItCarriesAborts (issue 24 item
// 8): a partition with outputs in the transaction that is missing from
// the offset commit (revoked after the commit was built) fails the hook
// with REBALANCE_IN_PROGRESS, so the session aborts: its outputs never
// commit without its offset.
func TestACommitWithoutAPartitionWhoseOutputsItCarriesAborts(t *testing.T) {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "d"
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, 1000
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	marks := map[string]map[int32]kgo.EpochOffset{"d": {0: {Offset: 17}, 1: {Offset: 40}}}
	err := atWatermarks(req, marks, []hkafka.TopicPartition{{Topic: "d", Partition: 0}, {Topic: "d", Partition: 1}})
	if !errors.Is(err, kerr.RebalanceInProgress) {
		t.Fatalf("hook error %v; want one wrapping REBALANCE_IN_PROGRESS", err)
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
	first = e.laneOutputs(first)
	if err := e.committed(&msg{kind: msgCommitted}, e.s.now()); err != nil {
		t.Fatal(err)
	}
	if !e.backingOff || e.attemptsMayStart(e.s.now()) {
		t.Fatal("attempts may start while the aborted commit backs off")
	}
	e.outstanding-- // the backoff's end, as collect takes it
	_ = e.committed(&msg{kind: msgCommitted, produceErr: errBackoffEnded}, e.s.now())
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

// TestNoAttemptStartsUntilTheWorkAnAbortedCommitKeptHasCommitted (issue
// 24 item 13): after a commit Kafka aborted, the work it kept commits
// before any new attempt starts, so however many rounds commits fail,
// what a crash would re-POST stays what was in flight plus one commit
// interval of completions.
func TestNoAttemptStartsUntilTheWorkAnAbortedCommitKeptHasCommitted(t *testing.T) {
	f := newBlockFixture(t)
	e := f.e
	pop := func() {
		var outs []*kgo.Record
		for _, pw := range e.w.parts {
			outs, _, _ = e.w.popDone(pw, e.s.now(), outs)
		}
		e.laneOutputs(outs)
	}
	f.publish(t, "b", 0, 0)
	e.runDry(t)
	for round := range 3 { // the kept work's commit aborts three times
		pop()
		if err := e.committed(&msg{kind: msgCommitted}, e.s.now()); err != nil {
			t.Fatal(err)
		}
		e.outstanding-- // the backoff's end, as collect takes it
		_ = e.committed(&msg{kind: msgCommitted, produceErr: errBackoffEnded}, e.s.now())
		f.publish(t, "c", round, int64(1+round))
		e.runDry(t)
		if got := f.rx.received(); slices.ContainsFunc(got, func(b string) bool { return strings.HasPrefix(b, `"c`) }) {
			t.Fatalf("round %d: receiver got %v before the kept work committed; want only b0", round, got)
		}
	}
	pop()
	if err := e.committed(&msg{kind: msgCommitted, committed: true}, e.s.now()); err != nil {
		t.Fatal(err)
	}
	e.runDry(t)
	if got := f.rx.received(); len(got) != 4 {
		t.Fatalf("receiver got %v once the kept work committed; want b0, c0, c1, c2", got)
	}
}
