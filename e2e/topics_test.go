package e2e

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func kafkaAdmin(t *testing.T, brokers []string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

func TestServicesCreateTopicsWithTheirConfigs(t *testing.T) {
	kc := defaults[kafkaConfig](t)
	kc.Brokers = brokers(t)
	kc.TopicPrefix = "t" + randomHex(4) + "."
	kc.Partitions = 2
	adm := kafkaAdmin(t, kc.Brokers)
	if err := kc.EnsureTopics(t.Context(), adm, kc.Specs()); err != nil {
		t.Fatal(err)
	}
	// A second run finds them and changes nothing.
	if err := kc.EnsureTopics(t.Context(), adm, kc.Specs()); err != nil {
		t.Fatalf("second EnsureTopics: %v", err)
	}
	details, err := adm.ListTopics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	rcs, err := adm.DescribeTopicConfigs(t.Context(), kc.Topics().Endpoints, kc.Topics().Deliveries)
	if err != nil {
		t.Fatal(err)
	}
	policy := map[string]string{}
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if c.Key == "cleanup.policy" {
				policy[rc.Name] = c.MaybeValue()
			}
		}
	}
	if policy[kc.Topics().Endpoints] != "compact" || policy[kc.Topics().Deliveries] != "delete" {
		t.Fatalf("cleanup policies %v", policy)
	}
	for _, spec := range kc.Specs() {
		d, ok := details[spec.Name]
		if !ok {
			t.Fatalf("topic %s was not created", spec.Name)
		}
		if len(d.Partitions) != 2 {
			t.Fatalf("topic %s has %d partitions, want 2", spec.Name, len(d.Partitions))
		}
	}
}

func TestServicesRefuseATopicWithTheWrongCleanupPolicy(t *testing.T) {
	kc := defaults[kafkaConfig](t)
	kc.Brokers = brokers(t)
	kc.TopicPrefix = "t" + randomHex(4) + "."
	adm := kafkaAdmin(t, kc.Brokers)
	// Someone created the endpoints topic by hand without compaction:
	// Hookline would forget endpoints as segments expire.
	deleting := "delete"
	if _, err := adm.CreateTopic(t.Context(), 1, -1, map[string]*string{"cleanup.policy": &deleting}, kc.Topics().Endpoints); err != nil {
		t.Fatal(err)
	}
	err := kc.EnsureTopics(t.Context(), adm, kc.Specs())
	if err == nil || !strings.Contains(err.Error(), kc.Topics().Endpoints) || !strings.Contains(err.Error(), "compact") {
		t.Fatalf("want an error naming %s and compact, got %v", kc.Topics().Endpoints, err)
	}
}
