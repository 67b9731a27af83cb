package history

import (
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/sdk/ids"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestWarmOpensEveryTableOfAReopenedIndex: a reopened index holds no
// table open until a query touches it; Warm opens them all, so the first
// queries after a restart pay no file opens.
func TestWarmOpensEveryTableOfAReopenedIndex(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, testTopics, WithCacheBytes(1<<20), WithMemtableBytes(1<<20), withoutTableStats)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for batch := range 3 {
		var recs []*kgo.Record
		for i := range 1000 {
			d := &hooklinev1.Delivery{DeliveryId: ids.New(ids.Delivery, now), EventId: ids.New(ids.Event, now), TenantId: "t",
				EndpointId: fmt.Sprint("ep_", i%7), EventType: "a.b", Payload: randomBytes(1024), Attempt: 1, CreatedAt: timestamppb.New(now)}
			r, err := hkafka.Record(testTopics.Deliveries, d.GetEndpointId(), d)
			if err != nil {
				t.Fatal(err)
			}
			r.Offset = int64(batch*1000 + i)
			recs = append(recs, r)
		}
		if err := s.Writer().Apply(recs, hkafka.Offsets{testTopics.Deliveries: {0: int64((batch + 1) * 1000)}}); err != nil {
			t.Fatal(err)
		}
		if err := s.db.Flush(); err != nil { // one table per batch at least
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(dir, testTopics, WithCacheBytes(1<<20), WithMemtableBytes(1<<20), withoutTableStats)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	levels, err := s.db.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	tables := 0
	for _, l := range levels {
		tables += len(l)
	}
	if tables < 2 {
		t.Fatalf("the index has %d tables; the test wants several", tables)
	}
	before := s.openTables()
	n, err := s.Warm()
	if err != nil {
		t.Fatal(err)
	}
	if n != tables || s.openTables() != int64(tables) {
		t.Fatalf("Warm opened %d of %d tables (%d open before it, %d after)", n, tables, before, s.openTables())
	}
	if before >= int64(tables) {
		t.Fatalf("all %d tables were open before Warm: the test proves nothing", tables)
	}
}

// randomBytes does not compress: the index's tables reach their target size.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// openTables reports how many tables the index holds open.
func (s *Store) openTables() int64 { return s.db.Metrics().FileCache.TableCount }

// withoutTableStats keeps Pebble's background statistics loader, which
// opens tables after Open, from opening them before Warm does.
func withoutTableStats(o *options) { o.noTableStats = true }
