package scheduler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/config"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/lanes"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// parkedRig is a scheduler's Kafka on kfake, with a client that plays
// the dispatcher (parks) and the API (endpoint records), and reads the
// deliveries topic.
type parkedRig struct {
	t   *testing.T
	c   *kfake.Cluster
	cfg Config
	cl  *kgo.Client
	rd  *kgo.Client
	tp  hkafka.Topics
	// seen counts each delivery id released to the deliveries topic.
	mu   sync.Mutex
	seen map[string]int
	next map[int32]int64 // the next offset to read, per deliveries partition
}

func newParkedRig(t *testing.T) *parkedRig {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cfg, err := config.Defaults[Config]()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	cfg.Kafka.Brokers = c.ListenAddrs()
	cfg.Kafka.TopicPrefix = "sch" + hex.EncodeToString(b) + "."
	cfg.Kafka.Partitions = 1
	cfg.Group = cfg.Kafka.TopicPrefix + "scheduler"
	cfg.TransactionalID = cfg.Kafka.TopicPrefix + "scheduler-1"
	cfg.Tiers = []string{"1m"}
	r := &parkedRig{t: t, c: c, cfg: cfg, tp: cfg.Kafka.Topics(), seen: map[string]int{}, next: map[int32]int64{}}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ensureTopics(t.Context()); err != nil {
		t.Fatal(err)
	}
	opts, err := cfg.Kafka.Opts()
	if err != nil {
		t.Fatal(err)
	}
	if r.cl, err = kgo.NewClient(opts...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.cl.Close)
	if r.rd, err = kgo.NewClient(append(opts, kgo.ConsumeTopics(r.tp.Deliveries), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.rd.Close)
	return r
}

// start runs a scheduler until the returned stop is called.
func (r *parkedRig) start() (stop func()) {
	s, err := New(r.cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(r.t.Context())
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx) }()
	return func() {
		cancel()
		if err := <-ran; err != nil {
			r.t.Errorf("scheduler ended with %v", err)
		}
	}
}

func (r *parkedRig) produce(recs ...*kgo.Record) {
	r.t.Helper()
	if err := r.cl.ProduceSync(r.t.Context(), recs...).FirstErr(); err != nil {
		r.t.Fatal(err)
	}
}

func (r *parkedRig) endpoint(id string, st hooklinev1.EndpointStatus, version uint64) {
	r.t.Helper()
	rec, err := hkafka.Record(r.tp.Endpoints, id, &hooklinev1.EndpointRecord{Version: version,
		Endpoint: &hooklinev1.Endpoint{Id: id, TenantId: "t", Url: "https://example.com/h", Status: st}})
	if err != nil {
		r.t.Fatal(err)
	}
	r.produce(rec)
}

// park writes what the dispatcher's park writes; pad makes the record
// bigger, so that a partition takes several fetches to read.
func (r *parkedRig) park(id, ep string, pad int) *kgo.Record {
	r.t.Helper()
	now := time.Now()
	rec, err := hkafka.Record(r.tp.Parked, id, &hooklinev1.Delivery{DeliveryId: id, EndpointId: ep, TenantId: "t",
		Kind: hooklinev1.DeliveryKind_DELIVERY_KIND_DEFERRED, HeldSince: timestamppb.New(now), ParkedAt: timestamppb.New(now),
		DueAt: timestamppb.New(now.Add(time.Hour)), EventType: string(make([]byte, pad))})
	if err != nil {
		r.t.Fatal(err)
	}
	r.produce(rec)
	return rec
}

// tombstone writes what a release writes to the parked topic.
func (r *parkedRig) tombstone(park *kgo.Record) {
	r.produce(&kgo.Record{Topic: r.tp.Parked, Key: park.Key,
		Headers: []kgo.RecordHeader{{Key: headerReleased, Value: []byte(strconv.FormatInt(park.Offset, 10))}}})
}

// until reads releases until cond holds of what was seen.
func (r *parkedRig) until(what string, cond func(seen map[string]int) bool) {
	r.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r.mu.Lock()
		ok := cond(r.seen)
		r.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s: not within 20s; released %v", what, r.seen)
		}
		ctx, cancel := context.WithTimeout(r.t.Context(), 200*time.Millisecond)
		fs := r.rd.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(rec *kgo.Record) {
			var d hooklinev1.Delivery
			if err := hkafka.Decode(rec, &d); err != nil {
				r.t.Fatal(err)
			}
			r.mu.Lock()
			r.seen[d.GetDeliveryId()]++
			r.next[rec.Partition] = rec.Offset + 1
			r.mu.Unlock()
		})
	}
}

// drained reads the deliveries topic to its end: every release
// committed so far is counted.
func (r *parkedRig) drained() {
	r.t.Helper()
	ends, err := kadm.NewClient(r.cl).ListEndOffsets(r.t.Context(), r.tp.Deliveries)
	if err != nil {
		r.t.Fatal(err)
	}
	r.until("the deliveries topic read to its end", func(map[string]int) bool {
		done := true
		ends.Each(func(e kadm.ListedOffset) {
			if e.Offset > 0 && r.next[e.Partition] < e.Offset-1 { // the last offset is a commit marker
				done = false
			}
		})
		return done
	})
}

// TestParkedDeliveriesAreReleasedOnceOnResumeAcrossARestart: a previous
// owner's releases (parks with their tombstones, big enough that the
// partition takes several fetches) are never released again, though
// their tombstones come fetches after their parks: nothing is released
// before the scheduler reads its own sync marker back. The live parks of
// a resumed endpoint are released, each once; a new scheduler (restart,
// same topic) releases none of them again, and releases what is still
// parked when its endpoint resumes, and a park written after the resume.
func TestParkedDeliveriesAreReleasedOnceOnResumeAcrossARestart(t *testing.T) {
	r := newParkedRig(t)
	r.endpoint("ep_1", hooklinev1.EndpointStatus_ENDPOINT_STATUS_PAUSED, 1)
	r.endpoint("ep_2", hooklinev1.EndpointStatus_ENDPOINT_STATUS_PAUSED, 1)
	// Released before: 40 × 64 KiB parks, then their tombstones.
	var old []*kgo.Record
	for i := range 40 {
		old = append(old, r.park(fmt.Sprint("dlv_old", i), "ep_1", 64<<10))
	}
	for _, p := range old {
		r.tombstone(p)
	}
	for i := range 10 {
		r.park(fmt.Sprint("dlv_a", i), "ep_1", 0)
	}
	for i := range 5 {
		r.park(fmt.Sprint("dlv_b", i), "ep_2", 0)
	}
	r.endpoint("ep_1", hooklinev1.EndpointStatus_ENDPOINT_STATUS_ACTIVE, 2) // resumed before the scheduler starts

	stop := r.start()
	r.until("ep_1's ten live parks released", func(seen map[string]int) bool {
		n := 0
		for i := range 10 {
			n += min(seen[fmt.Sprint("dlv_a", i)], 1)
		}
		return n == 10
	})
	stop()

	stop = r.start()
	r.endpoint("ep_2", hooklinev1.EndpointStatus_ENDPOINT_STATUS_ACTIVE, 2)
	r.until("ep_2's five parks released by the new scheduler", func(seen map[string]int) bool {
		n := 0
		for i := range 5 {
			n += min(seen[fmt.Sprint("dlv_b", i)], 1)
		}
		return n == 5
	})
	// The race a scan on resume had: a park written after the resume (a
	// dispatcher whose view lagged) is released too.
	r.park("dlv_late", "ep_2", 0)
	r.until("a park written after the resume released", func(seen map[string]int) bool { return seen["dlv_late"] == 1 })
	stop()
	r.drained()
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, n := range r.seen {
		if n != 1 || len(id) > 7 && id[:7] == "dlv_old" {
			t.Errorf("%s released %d times", id, n)
		}
	}
	if len(r.seen) != 16 {
		t.Errorf("released %v, want the 16 live parks once each", r.seen)
	}
}

// TestAnAbortedReleaseHopReleasesNothingTwice: the first release hops'
// offset commits fail (their transactions abort, the session rewinds);
// every parked delivery is still released exactly once.
func TestAnAbortedReleaseHopReleasesNothingTwice(t *testing.T) {
	r := newParkedRig(t)
	r.endpoint("ep_1", hooklinev1.EndpointStatus_ENDPOINT_STATUS_PAUSED, 1)
	for i := range 20 {
		r.park(fmt.Sprint("dlv_", i), "ep_1", 0)
	}
	const aborts = 3
	var mu sync.Mutex
	failed := 0
	r.c.ControlKey(int16(kmsg.TxnOffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r.c.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		if failed == aborts {
			return nil, nil, false
		}
		failed++
		in := req.(*kmsg.TxnOffsetCommitRequest)
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, t := range in.Topics {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = kerr.RebalanceInProgress.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
	stop := r.start()
	defer stop()
	r.endpoint("ep_1", hooklinev1.EndpointStatus_ENDPOINT_STATUS_ACTIVE, 2)
	r.until("every parked delivery released", func(seen map[string]int) bool { return len(seen) == 20 })
	r.drained()
	mu.Lock()
	if failed < aborts {
		t.Errorf("%d offset commits failed, want %d", failed, aborts)
	}
	mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, n := range r.seen {
		if n != 1 {
			t.Errorf("%s released %d times", id, n)
		}
	}
}

// TestNoParkedDeliveryIsReleasedBeforeItsMarkerIsReadBack drives the
// service's parked share by hand: parks of a resumed endpoint read
// before the scheduler's own sync marker stay put (their tombstones may
// be further on); read up to the marker, the ones whose tombstone came
// are not released, the others are.
func TestNoParkedDeliveryIsReleasedBeforeItsMarkerIsReadBack(t *testing.T) {
	cfg, err := config.Defaults[Config]()
	if err != nil {
		t.Fatal(err)
	}
	cfg.TransactionalID = "sch-1"
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.parked.setPartitions(1)
	s.store.Put(&hooklinev1.EndpointRecord{Version: 1, Endpoint: &hooklinev1.Endpoint{Id: "ep_1", Status: hooklinev1.EndpointStatus_ENDPOINT_STATUS_ACTIVE}})
	if _, err := s.parked.adjust(t.Context(), map[string]map[int32]kgo.Offset{s.topics.Parked: {0: kgo.NewOffset()}}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	park := func(id string, off int64) *kgo.Record {
		r, err := hkafka.Record(s.topics.Parked, id, &hooklinev1.Delivery{DeliveryId: id, EndpointId: "ep_1",
			ParkedAt: timestamppb.New(now), DueAt: timestamppb.New(now.Add(time.Hour))})
		if err != nil {
			t.Fatal(err)
		}
		r.Offset = off
		return r
	}
	apply := func(recs ...*kgo.Record) {
		s.parked.apply(kgo.FetchTopicPartition{Topic: s.topics.Parked, FetchPartition: kgo.FetchPartition{Partition: 0, Records: recs}})
	}
	released := func(h parkedHop) []string {
		var ids []string
		for _, r := range h.rel {
			ids = append(ids, r.d.GetDeliveryId())
		}
		return ids
	}
	h := s.parked.work(now, true)
	if len(h.markers) != 1 || len(h.sync) != 1 || len(h.rel) != 0 || len(h.out) != 0 {
		t.Fatalf("first hop: markers %v, releases %v; want a marker only, outside the transaction", h.markers, released(h))
	}
	s.parked.marked(h.markers)
	apply(park("dlv_old", 0), park("dlv_live", 1))
	if h := s.parked.work(now, true); len(h.rel) != 0 {
		t.Fatalf("released %v before the marker was read back", released(h))
	}
	marker := h.sync[0]
	marker.Offset = 3
	apply(&kgo.Record{Topic: s.topics.Parked, Key: []byte("dlv_old"), Offset: 2,
		Headers: []kgo.RecordHeader{{Key: headerReleased, Value: []byte("0")}}}, marker)
	h = s.parked.work(now, true)
	if got := released(h); len(got) != 1 || got[0] != "dlv_live" {
		t.Fatalf("released %v once caught up, want dlv_live only", got)
	}
	// Unfenced (no offset to commit): a marker, no release.
	s.parked.done(h, false)
	if h := s.parked.work(now, false); len(h.rel) != 0 || len(h.out) != 0 || len(h.sync) != 1 {
		t.Fatalf("an unfenced hop wrote %d records and %d markers with releases %v; want one marker", len(h.out), len(h.sync), released(h))
	}
}

// TestAMemberParkedBehindABlockedHeadIsReleasedWhenItsLaneIsUnblocked:
// a member the dispatcher parked behind its lane's blocked head stays
// parked while the lanes topic says the head is blocked — though its
// endpoint is active all along — and is released, once, when the
// operator's skip or resend leaves the lane unblocked.
func TestAMemberParkedBehindABlockedHeadIsReleasedWhenItsLaneIsUnblocked(t *testing.T) {
	r := newParkedRig(t)
	rec, err := hkafka.Record(r.tp.Endpoints, "ep_o", &hooklinev1.EndpointRecord{Version: 1,
		Endpoint: &hooklinev1.Endpoint{Id: "ep_o", TenantId: "t", Url: "https://example.com/h",
			Status: hooklinev1.EndpointStatus_ENDPOINT_STATUS_ACTIVE, Ordering: hooklinev1.Ordering_ORDERING_PER_KEY}})
	if err != nil {
		t.Fatal(err)
	}
	r.produce(rec)
	lane := func(outside ...*hooklinev1.LaneMember) {
		l, err := hkafka.Record(r.tp.Lanes, lanes.RecordKey("ep_o", "k"), &hooklinev1.LaneRecord{EndpointId: "ep_o", OrderingKey: "k", Outside: outside})
		if err != nil {
			t.Fatal(err)
		}
		r.produce(l)
	}
	follower := &hooklinev1.LaneMember{DeliveryId: "dlv_f", LaneSeq: 5}
	lane(&hooklinev1.LaneMember{DeliveryId: "dlv_head", LaneSeq: 3, Blocked: &hooklinev1.BlockedHead{}}, follower)
	// behind is what the dispatcher parks for a member at lane_seq 5 of
	// lane key of ep_o, behind that lane's blocked head.
	now := time.Now()
	behind := func(id, key string) *kgo.Record {
		rec, err := hkafka.Record(r.tp.Parked, id, &hooklinev1.Delivery{DeliveryId: id, EndpointId: "ep_o", TenantId: "t",
			Kind: hooklinev1.DeliveryKind_DELIVERY_KIND_DEFERRED, HeldSince: timestamppb.New(now), OrderingKey: key, LaneSeq: &follower.LaneSeq,
			DueAt: timestamppb.New(now.Add(time.Hour))})
		if err != nil {
			t.Fatal(err)
		}
		lanes.MarkParkedBehind(rec, key)
		return rec
	}
	park := behind("dlv_f", "k")
	// dlv_free waits in lane j, which nothing blocks: its release shows
	// the scheduler has read the lanes topic and decided on every parked
	// member (one partition: a hop decides on all of them at once).
	free := behind("dlv_free", "j")
	r.produce(park, free)
	stop := r.start()
	defer stop()
	r.until("a member of an unblocked lane released", func(seen map[string]int) bool { return seen["dlv_free"] == 1 })
	if n := r.seen["dlv_f"]; n != 0 {
		t.Fatalf("dlv_f released %d times while its lane's head is blocked (its endpoint is active)", n)
	}
	lane(follower) // the operator skipped the head
	r.until("dlv_f released once its lane is unblocked", func(seen map[string]int) bool { return seen["dlv_f"] == 1 })
	r.drained()
	if n := r.seen["dlv_f"]; n != 1 {
		t.Fatalf("dlv_f released %d times, want once", n)
	}
}
