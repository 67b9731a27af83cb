package kafka

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
)

// Record returns a record for topic keyed by key whose value is m in the
// protobuf binary encoding.
func Record(topic, key string, m proto.Message) (*kgo.Record, error) {
	v, err := proto.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("kafka: encode %T: %w", m, err)
	}
	return &kgo.Record{Topic: topic, Key: []byte(key), Value: v}, nil
}

// Decode reads r's value into m.
func Decode(r *kgo.Record, m proto.Message) error {
	if err := proto.Unmarshal(r.Value, m); err != nil {
		return fmt.Errorf("kafka: decode %T at %s/%d@%d: %w", m, r.Topic, r.Partition, r.Offset, err)
	}
	return nil
}
