package history

import (
	"fmt"
	"maps"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/sdk/ids"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestApplyCommitsALargePollInBoundedBatches: a poll can decompress to
// tens of MiB (a rebuild from offset 0 reads full fetches); Apply writes
// it in batches of at most maxBatch bytes (plus the record that crossed
// it), each storing the offsets its own records reach, so a crash
// between them resumes after the last batch committed; the last batch
// stores the poll's next offsets (past any control record).
func TestApplyCommitsALargePollInBoundedBatches(t *testing.T) {
	s := openTest(t)
	s.writer.maxBatch = 256 << 10
	type commit struct {
		bytes   int
		offsets hkafka.Offsets
	}
	var commits []commit
	s.writer.committed = func(n int, o hkafka.Offsets) {
		c := commit{n, hkafka.Offsets{}}
		for t, ps := range o {
			c.offsets[t] = maps.Clone(ps)
		}
		commits = append(commits, c)
	}
	payload := make([]byte, 16<<10)
	now := time.Now()
	var recs []*kgo.Record
	var dlvs []string
	for i := range 100 { // 1.6 MiB of payloads, two partitions
		at := now.Add(time.Duration(i) * time.Millisecond)
		d := &hooklinev1.Delivery{DeliveryId: ids.New(ids.Delivery, at), EventId: ids.New(ids.Event, at), TenantId: "t",
			EndpointId: "ep_1", EventType: "a.b", Payload: payload, CreatedAt: timestamppb.New(at)}
		r, err := hkafka.Record(testTopics.Deliveries, "ep_1", d)
		if err != nil {
			t.Fatal(err)
		}
		r.Partition, r.Offset = int32(i%2), int64(i/2)
		recs = append(recs, r)
		dlvs = append(dlvs, d.GetDeliveryId())
	}
	next := hkafka.Offsets{testTopics.Deliveries: {0: 51, 1: 50}} // partition 0 ends with a commit marker
	if err := s.Writer().Apply(recs, next); err != nil {
		t.Fatal(err)
	}

	if len(commits) < 6 {
		t.Fatalf("%d batches for 1.6 MiB at 256 KiB a batch", len(commits))
	}
	applied := 0
	for i, c := range commits {
		if c.bytes > s.writer.maxBatch+24<<10 {
			t.Fatalf("batch %d holds %d bytes, the bound is %d and one record", i, c.bytes, s.writer.maxBatch)
		}
		if i == len(commits)-1 {
			if fmt.Sprint(c.offsets) != fmt.Sprint(next) {
				t.Fatalf("the last batch stored %v, want the poll's next offsets %v", c.offsets, next)
			}
			continue
		}
		// A batch stores where its records end: a prefix of the poll of
		// k records reaches offset ceil(k/2) in partition 0, floor(k/2)
		// in 1; each batch's prefix is longer than the one before.
		o := c.offsets[testTopics.Deliveries]
		k := int(o[0] + o[1])
		if len(o) != 2 || o[0] != int64((k+1)/2) || o[1] != int64(k/2) || k <= applied {
			t.Fatalf("batch %d stored %v after the first %d records", i, o, applied)
		}
		applied = k
	}
	if applied == 0 || applied >= len(recs) {
		t.Fatalf("the batches before the last reached record %d of %d", applied, len(recs))
	}
	for _, id := range dlvs {
		if _, _, d, ok, err := s.Reader().Delivery("t", id); err != nil || !ok || len(d.GetPayload()) != len(payload) {
			t.Fatalf("delivery %s: found %v, %v", id, ok, err)
		}
	}
	if got, err := s.Offsets(); err != nil || fmt.Sprint(got) != fmt.Sprint(next) {
		t.Fatalf("stored offsets %v, %v; want %v", got, err, next)
	}
}

// TestAResultReadAgainAfterAReopenIsNotCountedTwice: Apply looks a
// result's attempt key up only for a record below the offsets stored
// with the last batch (a re-read); that bound must come from the index
// itself after a restart, or a re-read result would count its attempt
// twice.
func TestAResultReadAgainAfterAReopenIsNotCountedTwice(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	dlv, evt := ids.New(ids.Delivery, now), ids.New(ids.Event, now)
	res := &hooklinev1.AttemptResult{DeliveryId: dlv, EventId: evt, TenantId: "t", EndpointId: "ep_1", EventType: "a.b", Attempt: 1,
		State: hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED}
	r, err := hkafka.Record(testTopics.Results, "ep_1", res)
	if err != nil {
		t.Fatal(err)
	}
	r.Partition, r.Offset = 2, 41
	apply := func() *Store {
		s, err := Open(dir, testTopics)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Writer().Apply([]*kgo.Record{r}, hkafka.Offsets{testTopics.Results: {2: 42}}); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if err := apply().Close(); err != nil {
		t.Fatal(err)
	}
	s := apply() // the same record, read again by a restarted follower
	defer s.Close()
	st, _, _, ok, err := s.Reader().Delivery("t", dlv)
	if err != nil || !ok {
		t.Fatalf("delivery not indexed: %v", err)
	}
	if st.GetAttempts() != 1 {
		t.Fatalf("attempts %d after one result read twice, want 1", st.GetAttempts())
	}
}
