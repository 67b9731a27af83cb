package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// MaxRecordBytes is the largest record Hookline writes: a payload at the
// largest configurable limit plus the Delivery envelope. Topics carrying
// payloads are created with max.message.bytes set to it, and producers
// batch up to it.
const MaxRecordBytes = 8 << 20

// TopicSpec is one topic Hookline needs, with the configs it must have.
type TopicSpec struct {
	Name    string
	Configs map[string]string
}

// Specs returns every topic the services need with its configuration:
// compaction for endpoints, time retention for the rest.
func (c Config) Specs() []TopicSpec {
	t := c.Topics()
	retain := func(d time.Duration) map[string]string {
		return map[string]string{
			"cleanup.policy":    "delete",
			"retention.ms":      strconv.FormatInt(d.Milliseconds(), 10),
			"max.message.bytes": strconv.Itoa(MaxRecordBytes),
		}
	}
	return []TopicSpec{
		// delete.retention.ms is how long a tombstone outlives compaction;
		// the endpoints view remembers a deletion as long
		// (endpoints.DeletedMemory), so that a change written from an older
		// state never brings an endpoint back.
		{Name: t.Endpoints, Configs: map[string]string{"cleanup.policy": "compact", "delete.retention.ms": "86400000"}},
		{Name: t.Deliveries, Configs: retain(c.Retention)},
		{Name: t.Retries, Configs: retain(c.Retention)},
		{Name: t.Results, Configs: retain(c.Retention)},
		{Name: t.Notices, Configs: retain(c.Retention)},
		// The dispatcher's ordered lanes: a record per lane with members
		// outside memory, a tombstone when none is (docs/DESIGN.md).
		// max.message.bytes as every other topic's: the dispatcher sizes
		// every record it writes against MaxRecordBytes, and a lanes
		// record over the broker's 1 MiB default would abort every commit.
		{Name: t.Lanes, Configs: map[string]string{"cleanup.policy": "compact", "max.message.bytes": strconv.Itoa(MaxRecordBytes)}},
		// Paused endpoints' held deliveries, one record each while parked
		// and a tombstone once the scheduler released it (DESIGN I45). The
		// scheduler reads it from the start on every assignment, so
		// compaction keeps that read O(live parks + recent tombstones);
		// a tombstone outlives compaction a day, so a reader that began
		// before it was compacted still sees the release.
		{Name: t.Parked, Configs: map[string]string{"cleanup.policy": "compact", "delete.retention.ms": "86400000", "max.message.bytes": strconv.Itoa(MaxRecordBytes)}},
		{Name: t.Dead, Configs: retain(c.HoldRetention)},
	}
}

// DelaySpec is the spec of the delay-tier topic called name: time
// retention long enough for the longest hold, and the producer's
// timestamps, because a record's hold is measured from its timestamp.
func (c Config) DelaySpec(name string) TopicSpec {
	return TopicSpec{Name: name, Configs: map[string]string{
		"cleanup.policy":         "delete",
		"retention.ms":           strconv.FormatInt(c.Retention.Milliseconds(), 10),
		"max.message.bytes":      strconv.Itoa(MaxRecordBytes),
		"message.timestamp.type": "CreateTime",
	}}
}

// EnsureTopics creates the missing topics of specs with c's partition
// count and replication factor, verifies that existing ones have
// the cleanup policy Hookline relies on, and raises an existing topic's
// max.message.bytes to the spec's when it is lower. A topic with the wrong policy is
// an error that names it: a compacted deliveries topic would silently
// drop deliveries, a deleting endpoints topic would forget endpoints.
func (c Config) EnsureTopics(ctx context.Context, adm *kadm.Client, specs []TopicSpec) error {
	names := make([]string, 0, len(specs))
	for _, s := range specs {
		names = append(names, s.Name)
	}
	existing, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return fmt.Errorf("kafka: list topics: %w", err)
	}
	for _, s := range specs {
		if existing.Has(s.Name) {
			continue
		}
		cfg := make(map[string]*string, len(s.Configs))
		for k, v := range s.Configs {
			cfg[k] = &v
		}
		resp, err := adm.CreateTopic(ctx, int32(c.Partitions), int16(c.ReplicationFactor), cfg, s.Name)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("kafka: create topic %s: %w", s.Name, err)
		}
	}
	// A topic just created may not be known to every broker yet; wait
	// (bounded) for its configs to be describable.
	rcs, err := describeConfigs(ctx, adm, names)
	if err != nil {
		return err
	}
	var raise []kadm.AlterConfig
	var raiseTopics []string
	for _, s := range specs {
		rc, err := rcs.On(s.Name, nil)
		if err != nil {
			return fmt.Errorf("kafka: describe topic %s: %w", s.Name, err)
		}
		if rc.Err != nil {
			return fmt.Errorf("kafka: describe topic %s: %w", s.Name, rc.Err)
		}
		got := map[string]string{"cleanup.policy": "delete"}
		for _, cfg := range rc.Configs {
			got[cfg.Key] = cfg.MaybeValue()
		}
		if want, ok := s.Configs["cleanup.policy"]; ok && got["cleanup.policy"] != want {
			return fmt.Errorf("kafka: topic %s has cleanup.policy=%s, Hookline needs %s; fix it (kafka-configs --alter) or use another --topic-prefix", s.Name, got["cleanup.policy"], want)
		}
		// A topic created before it had max.message.bytes (the lanes
		// topic, at the broker's 1 MiB default) would refuse records
		// the services size as fitting: raise it.
		if want, ok := s.Configs["max.message.bytes"]; ok {
			w, _ := strconv.Atoi(want)
			if g, err := strconv.Atoi(got["max.message.bytes"]); err != nil || g < w {
				raise = append(raise, kadm.AlterConfig{Op: kadm.SetConfig, Name: "max.message.bytes", Value: kadm.StringPtr(want)})
				raiseTopics = append(raiseTopics, s.Name)
			}
		}
	}
	for i, name := range raiseTopics {
		resp, err := adm.AlterTopicConfigs(ctx, raise[i:i+1], name)
		if err == nil {
			var r kadm.AlterConfigsResponse
			if r, err = resp.On(name, nil); err == nil {
				err = r.Err
			}
		}
		if err != nil {
			return fmt.Errorf("kafka: topic %s has max.message.bytes below %s and raising it failed: %w; raise it (kafka-configs --alter)", name, *raise[i].Value, err)
		}
	}
	return nil
}

// describeConfigs describes the topics' configs, retrying while a newly
// created topic is still propagating (UNKNOWN_TOPIC_OR_PARTITION), for at
// most 30 seconds.
func describeConfigs(parent context.Context, adm *kadm.Client, names []string) (kadm.ResourceConfigs, error) {
	ctx, cancel := context.WithTimeout(parent, 30*time.Second)
	defer cancel()
	wait := 50 * time.Millisecond
	for {
		rcs, err := adm.DescribeTopicConfigs(ctx, names...)
		if err == nil {
			for _, rc := range rcs {
				if rc.Err != nil {
					err = fmt.Errorf("topic %s: %w", rc.Name, rc.Err)
					break
				}
			}
		}
		if err == nil {
			return rcs, nil
		}
		if !errors.Is(err, kerr.UnknownTopicOrPartition) {
			return nil, fmt.Errorf("kafka: describe topic configs: %w", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			if parent.Err() != nil {
				return nil, parent.Err()
			}
			return nil, fmt.Errorf("kafka: topics not visible 30 s after creation: %w", err)
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
	}
}
