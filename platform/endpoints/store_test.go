package endpoints

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// env is one kfake cluster with the endpoints topic and a producer.
type env struct {
	t       *testing.T
	cluster *kfake.Cluster
	cfg     hkafka.Config
	cl      *kgo.Client
}

func newEnv(t *testing.T) *env {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cfg := hkafka.Config{Brokers: c.ListenAddrs(), ClientID: "test", TopicPrefix: "t.", Partitions: 1, ReplicationFactor: 1}
	opts, err := cfg.Opts()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	if err := cfg.EnsureTopics(t.Context(), kadm.NewClient(cl), cfg.Specs()[:1]); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, cluster: c, cfg: cfg, cl: cl}
}

// start runs a Store on the topic until the test ends.
func (e *env) start() *Store {
	e.t.Helper()
	s := NewStore()
	stop, _, err := s.Start(e.t.Context(), e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(stop)
	return s
}

func (e *env) produce(ctx context.Context, rs ...*kgo.Record) error {
	return e.cl.ProduceSync(ctx, rs...).FirstErr()
}

func (e *env) produceOne(ctx context.Context, r *kgo.Record) error { return e.produce(ctx, r) }

// put writes rec as it is, with no condition checked by the writer, and
// returns the record written.
func (e *env) put(rec *hooklinev1.EndpointRecord) *kgo.Record {
	e.t.Helper()
	r, err := hkafka.Record(e.cfg.Topics().Endpoints, rec.GetEndpoint().GetId(), rec)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.produce(e.t.Context(), r); err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *env) tombstone(id string) *kgo.Record {
	e.t.Helper()
	r := &kgo.Record{Topic: e.cfg.Topics().Endpoints, Key: []byte(id)}
	if err := e.produce(e.t.Context(), r); err != nil {
		e.t.Fatal(err)
	}
	return r
}

// rebuilt returns the view a process starting now builds.
func (e *env) rebuilt() *Store {
	e.t.Helper()
	return e.start()
}

func record(id, url string, version uint64) *hooklinev1.EndpointRecord {
	return &hooklinev1.EndpointRecord{
		Endpoint: &hooklinev1.Endpoint{Id: id, TenantId: "acme", Url: url},
		Secrets:  []*hooklinev1.EndpointSecret{{Secret: "whsec_" + url}},
		Version:  version,
	}
}

func waitPast(t *testing.T, s *Store, r *kgo.Record) {
	t.Helper()
	if err := s.follow.WaitPast(t.Context(), r.Topic, r.Partition, r.Offset); err != nil {
		t.Fatal(err)
	}
}

func url(s *Store, id string) string { return s.Get(id).GetEndpoint().GetUrl() }

func TestTwoWritersOfOneVersionTheFirstInTheLogWinsForEveryReader(t *testing.T) {
	e := newEnv(t)
	s := e.start()
	e.put(record("ep_1", "https://v1", 1))
	e.put(record("ep_1", "https://first", 2))
	second := e.put(record("ep_1", "https://second", 2)) // written from v1 too
	waitPast(t, s, second)
	if got := url(s, "ep_1"); got != "https://first" {
		t.Fatalf("live view: url %q, want the first v2 in the log", got)
	}
	if got := url(e.rebuilt(), "ep_1"); got != "https://first" {
		t.Fatalf("rebuilt view: url %q, want the first v2 in the log", got)
	}
	// A writer learns that it lost, and the winner stays.
	r, _ := hkafka.Record(e.cfg.Topics().Endpoints, "ep_1", record("ep_1", "https://late", 2))
	if err := s.Write(t.Context(), r, e.produceOne); !errors.Is(err, ErrLost) {
		t.Fatalf("a write of a version already taken: %v, want ErrLost", err)
	}
	r, _ = hkafka.Record(e.cfg.Topics().Endpoints, "ep_1", record("ep_1", "https://v3", 3))
	if err := s.Write(t.Context(), r, e.produceOne); err != nil {
		t.Fatalf("a write of the next version: %v", err)
	}
	if got := url(s, "ep_1"); got != "https://v3" {
		t.Fatalf("after the next version: %q", got)
	}
}

// waitRecordAfter consumes the topic until a record of key after offset
// is read (what Repair writes) and returns it.
func waitRecordAfter(t *testing.T, e *env, key string, offset int64) *kgo.Record {
	t.Helper()
	opts, _ := e.cfg.Opts()
	cl, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(e.cfg.Topics().Endpoints),
		kgo.ConsumeResetOffset(kgo.NewOffset().At(offset+1)))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("no record of %s after offset %d", key, offset)
		}
		var got *kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Key) == key {
				got = r
			}
		})
		if got != nil {
			return got
		}
	}
}

func runRepair(t *testing.T, e *env, s *Store) {
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.Repair(ctx, e.produce, 10*time.Millisecond) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func TestALosingRecordNeverOutlivesCompaction(t *testing.T) {
	e := newEnv(t)
	s := e.start()
	runRepair(t, e, s)
	e.put(record("ep_1", "https://v1", 1))
	e.put(record("ep_1", "https://winner", 2))
	loser := e.put(record("ep_1", "https://loser", 2)) // the key's last record
	repair := waitRecordAfter(t, e, "ep_1", loser.Offset)
	waitPast(t, s, repair)
	if n := s.Unsettled(); n != 0 {
		t.Fatalf("%d endpoints still end with a losing record", n)
	}
	// The repair is the last batch, which compaction leaves alone (as
	// Kafka leaves the active segment): the loser survives as the key's
	// latest record in the cleaned part, and a new reader meets it first.
	e.cluster.Compact()
	if got := url(e.rebuilt(), "ep_1"); got != "https://winner" {
		t.Fatalf("after compaction (repair uncleaned) a new reader sees url %q, want the winner", got)
	}
	e.put(record("ep_other", "https://other", 1))
	e.cluster.Compact()
	if got := url(e.rebuilt(), "ep_1"); got != "https://winner" {
		t.Fatalf("after compaction a new reader sees url %q, want the winner", got)
	}
}

func TestADeletedEndpointIsNotBroughtBackByAWriteFromBeforeTheDelete(t *testing.T) {
	e := newEnv(t)
	s := e.start()
	runRepair(t, e, s)
	e.put(record("ep_1", "https://v1", 1))
	e.tombstone("ep_1")
	stale := e.put(record("ep_1", "https://stale", 2)) // e.g. an auto-pause from v1
	repair := waitRecordAfter(t, e, "ep_1", stale.Offset)
	if repair.Value != nil {
		t.Fatalf("repair of a deleted endpoint wrote a value, want a tombstone")
	}
	waitPast(t, s, repair)
	if rec := s.Get("ep_1"); rec != nil {
		t.Fatalf("live view brought the deleted endpoint back: %v", rec)
	}
	e.put(record("ep_other", "https://other", 1))
	e.cluster.Compact()
	if rec := e.rebuilt().Get("ep_1"); rec != nil {
		t.Fatalf("after compaction a new reader has the deleted endpoint: %v", rec)
	}
}

func TestDeletedEndpointsLeaveNoStateBehind(t *testing.T) {
	e := newEnv(t)
	s := e.start()
	for i := range 20 {
		id := "ep_" + string(rune('a'+i))
		rec := record(id, "https://x", 1)
		rec.Endpoint.TenantId = "tenant-" + id
		e.put(rec)
		e.tombstone(id)
	}
	// A record a DeletedMemory later in log time: every deletion is
	// forgotten.
	late := record("ep_late", "https://late", 1)
	r, _ := hkafka.Record(e.cfg.Topics().Endpoints, "ep_late", late)
	r.Timestamp = time.Now().Add(DeletedMemory + time.Hour)
	if err := e.produce(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	waitPast(t, s, r)
	if ids, tenants, prov := s.Size(); ids != 1 || tenants != 1 || prov != 0 {
		t.Fatalf("after 20 deleted endpoints and one live: %d ids, %d tenants, %d provisional; want 1, 1, 0", ids, tenants, prov)
	}
}

func TestPutIsProvisionalAndNeverOverridesTheLog(t *testing.T) {
	e := newEnv(t)
	s := e.start()
	v1 := e.put(record("ep_1", "https://v1", 1))
	waitPast(t, s, v1)
	s.Put(record("ep_1", "https://mine", 2)) // e.g. an auto-pause, written in a transaction that lost
	if got := url(s, "ep_1"); got != "https://mine" {
		t.Fatalf("Put not visible: %q", got)
	}
	theirs := e.put(record("ep_1", "https://theirs", 2))
	waitPast(t, s, theirs)
	if got := url(s, "ep_1"); got != "https://theirs" {
		t.Fatalf("after the log decided v2: %q, want the log's", got)
	}
	v3 := e.put(record("ep_1", "https://v3", 3))
	waitPast(t, s, v3)
	if got := url(s, "ep_1"); got != "https://v3" {
		t.Fatalf("this view disagrees with the log after a Put: %q", got)
	}
}

func TestBarrierSharesOneRoundAmongCallersThatArriveTogether(t *testing.T) {
	var b barrier
	started := make(chan struct{}, 10)
	release := make(chan struct{})
	b.sync = func(ctx context.Context) error {
		started <- struct{}{}
		<-release
		return nil
	}
	ctx := t.Context()
	var wg sync.WaitGroup
	wg.Go(func() { _ = b.join(ctx, ctx) })
	<-started // round 1 runs; everyone below joins round 2
	const callers = 50
	for range callers {
		wg.Go(func() {
			if err := b.join(ctx, ctx); err != nil {
				t.Error(err)
			}
		})
	}
	for {
		joined := b.joinedCh()
		b.mu.Lock()
		all := b.next != nil && b.next.waiters == callers
		b.mu.Unlock()
		if all {
			break
		}
		<-joined
	}
	close(release)
	wg.Wait()
	b.wait()
	if n := b.rounds.Load(); n != 2 {
		t.Fatalf("%d sync rounds for %d concurrent callers, want 2", n, callers+1)
	}
}

func TestBarrierSeesAnEndpointWrittenBeforeIt(t *testing.T) {
	e := newEnv(t)
	s := e.start()
	for i := range 20 {
		id := "ep_" + string(rune('a'+i))
		e.put(record(id, "https://x", 1))
		if err := s.Barrier(t.Context()); err != nil {
			t.Fatal(err)
		}
		if s.Get(id) == nil {
			t.Fatalf("%s written before the barrier is not in the view after it", id)
		}
	}
}

// BenchmarkFanOutBarrier measures what a read-your-writes barrier costs
// many concurrent publishes: Sync (one ListOffsets round each) against
// Barrier (shared rounds).
func BenchmarkFanOutBarrier(b *testing.B) {
	for _, tt := range []struct {
		name string
		wait func(*Store, context.Context) error
	}{
		{"sync-per-call", (*Store).Sync},
		{"shared-barrier", (*Store).Barrier},
	} {
		b.Run(tt.name, func(b *testing.B) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t.endpoints"))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			s := NewStore()
			stop, _, err := s.Start(b.Context(), hkafka.Config{Brokers: c.ListenAddrs(), ClientID: "bench", TopicPrefix: "t."})
			if err != nil {
				b.Fatal(err)
			}
			defer stop()
			b.SetParallelism(16) // many publishes at once, as under load
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := tt.wait(s, b.Context()); err != nil {
						b.Error(err)
						return
					}
				}
			})
			if r := s.barrier.rounds.Load(); r > 0 {
				b.ReportMetric(float64(r)/float64(b.N), "rounds/op")
			}
		})
	}
}

// A store that fails after its start reports it to the service that
// started it (StartWatched), which stops its work: a view that stopped
// following must not go on deciding secrets and pauses unseen.
func TestStartWatchedReportsAFailureAfterTheStart(t *testing.T) {
	e := newEnv(t)
	failed := make(chan error, 1)
	stop, err := NewStore().StartWatched(t.Context(), e.cfg, func(err error) { failed <- err })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	// From now on every fetch of the endpoints topic is refused for good.
	e.cluster.ControlKey(kmsg.Fetch.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.cluster.KeepControl()
		r := req.(*kmsg.FetchRequest)
		resp := r.ResponseKind().(*kmsg.FetchResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	select {
	case err := <-failed:
		if !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("the store failed with %v, not the refused fetch", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the store's failure after its start was never reported")
	}
}
