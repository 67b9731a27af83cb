package kafkatest

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
)

// Decode returns the values of recs, each decoded into a new M, in
// order; records without a value (tombstones) are skipped. A value that
// does not decode fails the test.
func Decode[M proto.Message](t testing.TB, recs []*kgo.Record, newM func() M) []M {
	t.Helper()
	out := make([]M, 0, len(recs))
	for _, r := range recs {
		if r.Value == nil {
			continue
		}
		m := newM()
		if err := proto.Unmarshal(r.Value, m); err != nil {
			t.Fatalf("decode %T at %s/%d@%d: %v", m, r.Topic, r.Partition, r.Offset, err)
		}
		out = append(out, m)
	}
	return out
}

// DecodeTopic is Decode of the records of recs on topic.
func DecodeTopic[M proto.Message](t testing.TB, recs []*kgo.Record, topic string, newM func() M) []M {
	t.Helper()
	return Decode(t, OnTopic(recs, topic), newM)
}

// OnTopic returns the records of recs on topic, in order.
func OnTopic(recs []*kgo.Record, topic string) []*kgo.Record {
	var out []*kgo.Record
	for _, r := range recs {
		if r.Topic == topic {
			out = append(out, r)
		}
	}
	return out
}
