package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/endpoints"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/lanes"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The scheduler's side of the parked topic (docs/DESIGN.md "Paused
// endpoints hold in a parked topic", I45): it reads every owned parked
// partition from its start into the index (parked.go), proves it caught
// up with a sync marker it writes and reads back, and releases, inside
// its hops' transactions, each parked delivery whose endpoint is no
// longer paused (or is gone) or whose hold is over — the delivery to the
// deliveries topic and a tombstone of its parked record, together.

const (
	// headerSync marks a sync marker on the parked topic; its value is
	// the marker's token.
	headerSync = "hookline-sync"
	// headerReleased is on a tombstone: the offset of the park record it
	// releases, so that it never removes a later park of the same key.
	headerReleased = "hookline-released-offset"
	// parkedReleasesPerHop bounds one hop's releases: a large resume is
	// a few transactions, not one huge one.
	parkedReleasesPerHop = 1000
	// parkedTick is the longest the poll loop waits while anything is
	// parked or a partition is catching up: a resume seen by the
	// endpoints view is acted on within it.
	parkedTick = 250 * time.Millisecond
)

// parkedView is the scheduler's side of the parked topic: the index of
// the owned parked partitions (parked.go), the sync markers' state, and
// the releases it decides for the poll loop's hops. Its own lock guards
// all of it: partition callbacks and the poll loop both reach it. It
// knows the Service only through what it is given (the endpoints view,
// the set-aside of a record Kafka refuses, the loop's wake-up).
type parkedView struct {
	topics  hkafka.Topics
	txnID   string        // the scheduler's transactional id: the markers' tokens name it
	recheck time.Duration // --park-recheck: an overflow's next look
	max     int           // --max-parked
	log     *slog.Logger
	store   *endpoints.Store // which parked deliveries may go (nil: all)
	// lanes says which members parked behind a blocked head may go: the
	// lanes topic's view, set once it has read the topic (nil until
	// then: such members only expire).
	lanes    atomic.Pointer[lanes.View]
	overflow metric.Int64Counter
	// unwritable are deliveries a broker refused a release of (shared
	// with the Service's tier moves); setAside dead-letters one.
	unwritable *hkafka.Unwritables
	setAside   func(d *hooklinev1.Delivery, why string, now time.Time) []*kgo.Record
	wake       func() // wakes the poll loop: a marker is to be written

	mu        sync.Mutex
	idx       *parkedIndex
	n         int // the parked topic's partition count (0: not learnt yet)
	syncKeys  map[int32]string
	markerSeq uint64
	sessionID int64
}

// startSession gives a new session an empty index, rebuilt from the log
// on assignment, and markers of its own.
func (v *parkedView) startSession(id int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.idx = newParkedIndex()
	v.sessionID = id
}

// adjust starts every newly assigned parked partition from its
// start, with an empty index: its committed offset never matters
// (kgo.AdjustFetchOffsetsFn).
func (v *parkedView) adjust(_ context.Context, m map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	parts, ok := m[v.topics.Parked]
	if !ok {
		return m, nil
	}
	v.mu.Lock()
	for p := range parts {
		parts[p] = kgo.NewOffset().AtStart().WithEpoch(-1)
		v.idx.assign(p)
	}
	v.mu.Unlock()
	v.wake() // a marker is to be written
	return m, nil
}

// forget drops the index of the parked partitions in m.
func (v *parkedView) forget(m map[string][]int32) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, p := range m[v.topics.Parked] {
		v.idx.drop(p)
	}
}

// rewind reads every owned parked partition again from its start
// with an empty index: after an aborted hop the session rewound to the
// committed offsets, and what the index learnt from what it had polled
// since (and its releases) may not be in the log.
func (v *parkedView) rewind(cl *kgo.Client) {
	v.mu.Lock()
	offs := map[int32]kgo.EpochOffset{}
	for p := range v.idx.parts {
		v.idx.assign(p)
		offs[p] = kgo.EpochOffset{Epoch: -1, Offset: 0}
	}
	v.mu.Unlock()
	if len(offs) > 0 {
		cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{v.topics.Parked: offs})
	}
}

// partitions learns the parked topic's partition count, for the sync
// markers' keys.
func (v *parkedView) partitions(ctx context.Context, adm *kadm.Client) error {
	td, err := adm.ListTopics(ctx, v.topics.Parked)
	if err != nil {
		return fmt.Errorf("scheduler: parked topic metadata: %w", err)
	}
	t, ok := td[v.topics.Parked]
	if !ok || t.Err != nil || len(t.Partitions) == 0 {
		return fmt.Errorf("scheduler: parked topic metadata: %w", t.Err)
	}
	v.setPartitions(len(t.Partitions))
	return nil
}

// setPartitions sets the parked topic's partition count.
func (v *parkedView) setPartitions(n int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.n = n
	v.syncKeys = map[int32]string{}
}

// syncKey returns a key that kgo's default partitioner (the one every
// producer of the parked topic uses) sends to partition p of n.
func syncKey(topic string, p int32, n int) string {
	part := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
	for i := 0; ; i++ {
		k := "hookline-sync/" + strconv.Itoa(int(p)) + "/" + strconv.Itoa(i)
		if part.Partition(&kgo.Record{Key: []byte(k)}, n) == int(p) {
			return k
		}
	}
}

// apply indexes one fetched parked partition's records.
func (v *parkedView) apply(fp kgo.FetchTopicPartition) {
	v.mu.Lock()
	defer v.mu.Unlock()
	pp := v.idx.parts[fp.Partition]
	if pp == nil {
		return // not (or no longer) owned
	}
	for _, r := range fp.Records {
		if tok, ok := header(r, headerSync); ok {
			if !pp.needMarker && pp.marker != "" && tok == pp.marker {
				pp.caughtUp = true
			}
			continue
		}
		if r.Value == nil {
			if off, ok := header(r, headerReleased); ok {
				if n, err := strconv.ParseInt(off, 10, 64); err == nil {
					if e := pp.byKey[string(r.Key)]; e != nil && e.offset == n {
						v.idx.tombstone(fp.Partition, string(r.Key), r.Offset)
					}
					continue
				}
			}
			v.idx.tombstone(fp.Partition, string(r.Key), r.Offset)
			continue
		}
		var d hooklinev1.Delivery
		if err := hkafka.Decode(r, &d); err != nil || d.GetDeliveryId() == "" {
			v.log.Error("undecodable parked record ignored", "partition", r.Partition, "offset", r.Offset, "err", err)
			continue
		}
		due := time.Time{}
		if d.GetDueAt() != nil {
			due = d.GetDueAt().AsTime()
		}
		e := &parkedEntry{
			key: string(r.Key), rec: detach([]*kgo.Record{r})[0], offset: r.Offset,
			endpoint: d.GetEndpointId(), due: due,
		}
		if key, ok := lanes.ParkedBehind(r); ok {
			e.lane = &parkedLane{key: key, seq: d.GetLaneSeq()}
		}
		v.idx.add(fp.Partition, e)
	}
}

func header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// parkedHop is the parked topic's share of one hop.
type parkedHop struct {
	out []*kgo.Record
	// sync are markers to write outside the hop's transaction (see
	// parkedWork), markers the tokens they carry per partition.
	sync    []*kgo.Record
	rel     []release
	picks   []parkedPick
	markers map[int32]string
}

// lanesRetry is the wait before the lanes view's first sync is tried
// again.
const lanesRetry = time.Second

// syncLanes hands view to the parked view once f has read the lanes
// topic up to where it stood (Sync, tried again until ctx ends): from
// then on a member parked behind a blocked head goes when its lane is
// unblocked. Before, such members only expire: released on a view that
// had read nothing yet, every one of them would come back to its
// dispatcher only to be parked again.
func (v *parkedView) syncLanes(ctx context.Context, f *hkafka.Follower, view *lanes.View) {
	for {
		err := f.Sync(ctx, v.topics.Lanes)
		if err == nil {
			v.lanes.Store(view)
			if v.wake != nil {
				v.wake()
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
		v.log.Warn("lanes view not synced; trying again", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(lanesRetry):
		}
	}
}

// busy reports whether the parked topic may have work for a hop.
func (v *parkedView) busy() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.idx.pending()
}

// marker returns a new sync marker for parked partition p (mu held).
func (v *parkedView) marker(p int32, now time.Time) (*kgo.Record, string) {
	k, ok := v.syncKeys[p]
	if !ok {
		k = syncKey(v.topics.Parked, p, v.n)
		v.syncKeys[p] = k
	}
	v.markerSeq++
	tok := v.txnID + "/" + strconv.FormatInt(v.sessionID, 10) + "/" + strconv.FormatUint(v.markerSeq, 10)
	return &kgo.Record{Topic: v.topics.Parked, Key: []byte(k), Value: []byte(tok), Timestamp: now,
		Headers: []kgo.RecordHeader{{Key: headerSync, Value: []byte(tok)}}}, tok
}

// work decides, at now, the parked topic's share of a hop: a sync
// marker for each partition that needs one, and the releases (bounded)
// of what may go, each with its tombstone. The picked entries are marked
// releasing until done.
//
// A hop releases only when its End commits an offset (fenced): kgo's
// GroupTransactSession.End skips the group generation check, and the
// heartbeat that follows it, for a commit with no offsets, so a
// scheduler cut off from its group (a zombie) could release what its
// successor releases too. A hop with releases to make and no offset to
// commit writes a marker instead (into a parked partition it owns, a
// token no one waits for), and the next hop, which polls it, releases.
//
// Markers are written outside the hop's transaction, by a plain
// producer (sync): a transaction that commits no offsets costs
// kgo's End a 500 ms wait before it returns (txn.go: without KIP-447's
// answer it holds the session's lock that long after a commit), and a
// marker needs no transaction — read committed, reading it back still
// means every transaction before it in the partition has ended.
func (v *parkedView) work(now time.Time, fenced bool) parkedHop {
	v.mu.Lock()
	defer v.mu.Unlock()
	var h parkedHop
	if v.n == 0 {
		return h
	}
	for _, p := range v.idx.needMarkers() {
		r, tok := v.marker(p, now)
		if h.markers == nil {
			h.markers = map[int32]string{}
		}
		h.markers[p] = tok
		h.sync = append(h.sync, r)
	}
	var state func(string) endpointState
	if v.store != nil {
		state = func(ep string) endpointState {
			rec := v.store.Get(ep)
			switch {
			case rec == nil:
				return endpointGone
			case rec.GetEndpoint().GetStatus() != hooklinev1.EndpointStatus_ENDPOINT_STATUS_PAUSED:
				return endpointReleased
			}
			return endpointPaused
		}
	}
	var blocked func(string, *parkedLane) bool
	if view := v.lanes.Load(); view != nil && v.store != nil {
		blocked = func(ep string, l *parkedLane) bool {
			// An endpoint no longer ordered has no lanes to wait in.
			o := v.store.Get(ep).GetEndpoint().GetOrdering()
			ordered := o == hooklinev1.Ordering_ORDERING_PER_ENDPOINT || o == hooklinev1.Ordering_ORDERING_PER_KEY
			return ordered && view.BlockedBefore(ep, l.key, l.seq)
		}
	}
	picks := v.idx.pick(now, state, blocked, parkedReleasesPerHop, v.max)
	if len(picks) > 0 && !fenced {
		if len(h.sync) == 0 {
			r, _ := v.marker(picks[0].p, now)
			h.sync = append(h.sync, r)
		}
		return h
	}
	for _, pk := range picks {
		recs, rel := v.unpark(pk, now)
		if recs == nil {
			continue
		}
		pk.e.releasing = true
		h.picks = append(h.picks, pk)
		h.out = append(h.out, recs...)
		if rel != nil {
			h.rel = append(h.rel, *rel)
		}
	}
	return h
}

// unpark returns the records that release pk's delivery (or forward it,
// over the memory bound, to the retries topic due a recheck later) and
// its tombstone; rel is set for a release to the deliveries topic.
func (v *parkedView) unpark(pk parkedPick, now time.Time) ([]*kgo.Record, *release) {
	var d hooklinev1.Delivery
	if err := hkafka.Decode(pk.e.rec, &d); err != nil {
		return nil, nil // decoded when indexed: cannot happen
	}
	var waited time.Duration
	if pa := d.GetParkedAt(); pa != nil {
		waited = max(now.Sub(pa.AsTime()), 0)
	}
	d.PausedFor = durationpb.New(d.GetPausedFor().AsDuration() + waited)
	if g := d.GetGiveUpAt(); g != nil {
		d.GiveUpAt = timestamppb.New(g.AsTime().Add(waited))
	}
	d.ParkedAt = nil
	d.Kind = hooklinev1.DeliveryKind_DELIVERY_KIND_DEFERRED
	topic := v.topics.Deliveries
	switch {
	case pk.overflow:
		topic = v.topics.Retries
		d.DueAt = timestamppb.New(now.Add(v.recheck))
	case d.GetDueAt() == nil || d.GetDueAt().AsTime().After(now):
		d.DueAt = timestamppb.New(now) // a resume; an expiry keeps its deadline
	}
	out, err := hkafka.Record(topic, d.GetEndpointId(), &d)
	if err != nil {
		panic(err) // a message the scheduler built: a bug
	}
	out.Timestamp = now
	out.Headers = append(out.Headers, lanes.WithoutParkedBehind(pk.e.rec.Headers)...)
	tomb := &kgo.Record{Topic: v.topics.Parked, Key: []byte(pk.e.key), Timestamp: now,
		Headers: []kgo.RecordHeader{{Key: headerReleased, Value: []byte(strconv.FormatInt(pk.e.offset, 10))}}}
	if pk.overflow {
		v.overflow.Add(context.Background(), 1)
	}
	why := hkafka.OverLimit(out)
	if why == "" {
		why = v.unwritable.Reason(d.GetDeliveryId())
	}
	if why != "" {
		return append(v.setAside(&d, why, now), tomb), nil
	}
	var rel *release
	if !pk.overflow {
		rel = &release{&d, out}
	}
	return []*kgo.Record{out, tomb}, rel
}

// done settles a hop's parked share: committed, its releases leave
// the index and its markers are the ones to read back; aborted, its
// picks are unmarked (the caller rewinds the parked partitions).
func (v *parkedView) done(h parkedHop, committed bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, pk := range h.picks {
		pk.e.releasing = false
		if committed {
			v.idx.released(pk.p, pk.e)
		}
	}
}

// markerTimeout bounds the write of a hop's sync markers.
const markerTimeout = 2 * time.Second

// sync writes a hop's markers with the plain producer cl, before
// the hop's transaction, and makes them the ones to read back. A failed
// write leaves them to be written again by a later hop (within
// parkedTick: the partition is pending).
func (v *parkedView) sync(ctx context.Context, cl *kgo.Client, h parkedHop) {
	if len(h.sync) == 0 {
		return
	}
	// Bounded: the hop waits for the markers, and a produce that hangs
	// (a broker that does not answer) must not stop the scheduler; a
	// marker not written is written again by a later hop.
	pctx, cancel := context.WithTimeout(ctx, markerTimeout)
	defer cancel()
	if err := cl.ProduceSync(pctx, h.sync...).FirstErr(); err != nil {
		if ctx.Err() == nil {
			v.log.Warn("parked topic's sync marker not written; writing it again", "err", err)
		}
		return
	}
	v.marked(h.markers)
}

// marked makes the markers written (by partition) the ones to
// read back.
func (v *parkedView) marked(markers map[int32]string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for p, tok := range markers {
		if pp := v.idx.parts[p]; pp != nil && pp.needMarker {
			pp.needMarker, pp.marker, pp.caughtUp = false, tok, false
		}
	}
}

// pending reports whether the poll loop must wake within parkedTick:
// anything parked, or a partition catching up.
func (v *parkedView) pending() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.idx.pending()
}
