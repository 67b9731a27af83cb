package kafka

import (
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestEnsureTopicsRaisesALowerMaxMessageBytes (issue 24 item 1): a topic
// created before it had max.message.bytes (the lanes topic was, at the
// broker's 1 MiB default) gets the limit every record is sized against,
// so a record the services size as fitting is never refused for it.
func TestEnsureTopicsRaisesALowerMaxMessageBytes(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg := Config{Brokers: c.ListenAddrs(), TopicPrefix: "x.", Partitions: 1, ReplicationFactor: 1}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	lanes := cfg.Topics().Lanes
	if _, err := adm.CreateTopic(t.Context(), 1, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, lanes); err != nil {
		t.Fatal(err)
	}
	if err := cfg.EnsureTopics(t.Context(), adm, cfg.Specs()); err != nil {
		t.Fatal(err)
	}
	rcs, err := adm.DescribeTopicConfigs(t.Context(), lanes)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(lanes, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	for _, e := range rc.Configs {
		if e.Key == "max.message.bytes" {
			got = e.MaybeValue()
		}
	}
	if got != strconv.Itoa(MaxRecordBytes) {
		t.Fatalf("%s max.message.bytes = %q after EnsureTopics, want %d", lanes, got, MaxRecordBytes)
	}
}
