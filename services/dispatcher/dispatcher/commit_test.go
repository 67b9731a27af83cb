package dispatcher

import (
	"testing"

	hkafka "github.com/hookline/hookline/platform/kafka"
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
	if err := atWatermarks(req, marks, []hkafka.TopicPartition{{Topic: "d", Partition: 0}}, func(hkafka.TopicPartition) bool { return true }); err != nil {
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
