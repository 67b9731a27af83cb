package kafkatest

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestDecodeTopicSkipsOtherTopicsAndTombstones(t *testing.T) {
	val := func(s string) []byte {
		b, err := proto.Marshal(wrapperspb.String(s))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	recs := []*kgo.Record{
		{Topic: "a", Value: val("a1")},
		{Topic: "b", Value: val("b1")},
		{Topic: "a"}, // tombstone
		{Topic: "a", Value: val("a2")},
	}
	got := DecodeTopic(t, recs, "a", func() *wrapperspb.StringValue { return new(wrapperspb.StringValue) })
	if len(got) != 2 || got[0].GetValue() != "a1" || got[1].GetValue() != "a2" {
		t.Fatalf("DecodeTopic(a) = %v, want [a1 a2]", got)
	}
	if all := Decode(t, recs, func() *wrapperspb.StringValue { return new(wrapperspb.StringValue) }); len(all) != 3 {
		t.Fatalf("Decode = %v, want the three values", all)
	}
}
