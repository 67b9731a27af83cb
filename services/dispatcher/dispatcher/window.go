package dispatcher

import (
	"context"
	"sync"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The window is every delivery record polled and not yet committed, per
// partition in offset order. Records complete out of order (a slow
// receiver holds only its own), and each commit writes the outputs of
// every partition's contiguous completed prefix together with the offset
// just past it (the low watermark). A completed record's outputs wait in
// memory until the watermark passes them, so a crash repeats attempts
// (receivers deduplicate on webhook-id) but never writes a Kafka record
// twice and never loses one.
//
// The window is bounded (WindowRecords, WindowBytes), charged what it
// really holds: each record with its decoded copy and, once done, its
// outputs until they are committed. When it is full the
// loop stops fetching, and partitions whose oldest record waits in a
// queue spill that queue (spill.go). Committing pops the completed
// prefix, so its cost is what was completed, never the window's size.
//
// Only the loop goroutine touches the window, except dropped, which the
// partition callbacks mark and the loop sweeps.

type tp struct {
	topic     string
	partition int32
}

// entryState is where a polled record is in the pipeline.
type entryState uint8

const (
	entryResolving entryState = iota // waits for the endpoints view to learn its endpoint
	entryQueued                      // waits in its endpoint's lane
	entryEarly                       // read before its due time; waits in memory until it (early.go)
	entryInFlight                    // being attempted
	entryDone                        // outputs ready; waits for the watermark
	entryDropped                     // its partition was revoked or rewound
)

// entryOverhead is what an entry costs the window beyond its record's
// bytes (the entry, the record struct, the decoded delivery's fields).
const entryOverhead = 512

// entry is one polled delivery record.
type entry struct {
	rec      *kgo.Record
	part     *partWindow
	d        *hooklinev1.Delivery // nil when the record does not decode
	lane     *lane
	key      *keyLane               // its ordered lane, while it has a turn to end (ordered.go)
	opKey    *keyLane               // its ordered lane, until its lane change is committed (lanes.go)
	opMember *hooklinev1.LaneMember // the change: outside (or blocked) as this, or not outside (nil)
	size     int64                  // charged to the window
	cost     int64                  // attempt memory charged while in flight
	state    entryState
	outs     []*kgo.Record
	queuedAt time.Time
	// synced is set once the endpoints view was synced for this record,
	// so an endpoint still unknown then is deleted; want is the resolver
	// round it waits for (resolve.go), 0 when none.
	synced bool
	// fetching is set while a blocked head's payload is read back for
	// this lane command (lanecmd.go): it waits in pw.resolving meanwhile.
	fetching bool
	want     uint64
	// aboveTxn is set while a commit in progress carries its outputs
	// above its partition's watermark, aboveDone once one committed them
	// (above.go): its outputs are released, and the watermark passes it
	// with nothing more to write.
	aboveTxn, aboveDone bool
	// group is set on the entries of a batch formed from separate
	// records (batch.go): they commit whole or not at all; formed, on the
	// entry that carries their outputs, is the batch's answer key.
	group  *batchGroup
	formed *answerKey
}

// partWindow is one partition's part of the window.
type partWindow struct {
	k       tp
	entries []*entry // entries[head:] are uncommitted, in offset order
	head    int
	next    int64 // offset after the last record polled
	// epoch is the leader epoch of the last record the watermark passed
	// (-1 before any): a commit at the watermark names it.
	epoch int32
	// headSince is when entries[head] became the oldest uncommitted
	// record: how long the watermark has stood still.
	headSince time.Time
	// resolving are the entries waiting for the partition's resolver,
	// in offset order: they are placed in that order (resolve.go).
	resolving []*entry
	res       resolver
	// ctx ends when the partition is dropped: its attempts stop.
	ctx     context.Context
	cancel  context.CancelFunc
	dropped bool
	// records and bytes are the partition's part of the window's
	// charge (bytes: its records' charge, not their outputs, which the
	// window's own bytes count); paused says its fetching is paused for
	// holding more than its share (shareFetch).
	records int
	bytes   int64
	paused  bool
	// above are the offsets above the watermark whose outputs are
	// committed (or in the commit in progress), ascending (above.go).
	above []int64
}

// window is the dispatch loop's record state.
type window struct {
	parts      map[tp]*partWindow
	records    int
	bytes      int64
	maxRecords int
	maxBytes   int64
	// txnRecords and txnBytes are what the commit in flight popped
	// (holdTxn): off every partition's charge, still in memory until the
	// commit ends, and put back by an abort (committer.keepTxn).
	txnRecords int
	txnBytes   int64
	// done counts entries done since the last commit.
	done int

	mu      sync.Mutex
	dropped map[tp]bool

	// popped, when set, is told of every entry popDone removes;
	// created of every partition window made.
	popped  func(*entry)
	created func(*partWindow)
	// fresh are the entries done since the last commit (and those a
	// commit could not take above their watermark): above.go.
	fresh []*entry
}

func newWindow(maxRecords int, maxBytes int64) *window {
	return &window{parts: map[tp]*partWindow{}, dropped: map[tp]bool{}, maxRecords: maxRecords, maxBytes: maxBytes}
}

// full reports whether the window is at its budget: the loop polls no
// more until commits make room.
func (w *window) full() bool {
	records, bytes := w.held()
	return records >= w.maxRecords || bytes >= w.maxBytes
}

// held is what the window holds in memory: its charge and what the
// commit in flight popped. Until 2026-12-07 a commit's popped entries
// left the charge when they were popped, so polls refilled the window
// while the commit was in flight and an abort put them back on top:
// make sim seed 48 (seven aborts, a budget of 15 and polls of 4) held
// 42 deliveries, and every abort in a row could add up to a window more.
// Counted until the commit ends, the window never holds more than its
// budget and one poll (TestAWindowCountsWhatItsCommitInFlightPopped).
func (w *window) held() (int, int64) {
	return w.records + w.txnRecords, w.bytes + w.txnBytes
}

// holdTxn counts ens, which the commit being built popped, as held until
// endTxn.
func (w *window) holdTxn(ens []*entry) {
	for _, e := range ens {
		w.txnRecords += e.counted()
		w.txnBytes += e.size
	}
}

// endTxn forgets what the commit that ended had popped: committed, or put
// back on the charge (keepTxn), or gone with its partition.
func (w *window) endTxn() { w.txnRecords, w.txnBytes = 0, 0 }

// forget marks partitions this instance no longer owns (any goroutine);
// their attempts are cancelled at once, and the loop sweeps the rest.
func (w *window) forget(m map[string][]int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for t, ps := range m {
		for _, p := range ps {
			k := tp{t, p}
			w.dropped[k] = true
			if pw := w.parts[k]; pw != nil {
				pw.cancel()
			}
		}
	}
}

// forgetAll drops everything: after an aborted commit the session rewound
// to the committed offsets, and every record above them comes again.
func (w *window) forgetAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, pw := range w.parts {
		w.dropped[k] = true
		pw.cancel()
	}
}

// owns reports whether pw is still the window of its partition: not
// marked by a revoke or a loss, nor dropped and made again since (any
// goroutine).
func (w *window) owns(pw *partWindow) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ownsLocked(pw)
}

// ownsLocked is owns with w.mu held.
func (w *window) ownsLocked(pw *partWindow) bool {
	return pw != nil && !pw.dropped && !w.dropped[pw.k] && w.parts[pw.k] == pw
}

// takeDropped returns the partitions marked dropped since the last call,
// removing them from the window (loop goroutine only).
func (w *window) takeDropped() []*partWindow {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*partWindow
	for k := range w.dropped {
		if pw := w.parts[k]; pw != nil {
			pw.dropped = true
			delete(w.parts, k)
			out = append(out, pw)
		}
	}
	clear(w.dropped)
	return out
}

// add places a polled record in its partition's window, or returns nil
// when it was polled before (its partition was not rewound since).
func (w *window) add(r *kgo.Record, now time.Time, base context.Context) *entry {
	k := tp{r.Topic, r.Partition}
	pw := w.parts[k]
	if pw == nil {
		w.mu.Lock()
		ctx, cancel := context.WithCancel(base)
		pw = &partWindow{k: k, next: r.Offset, epoch: -1, headSince: now, ctx: ctx, cancel: cancel}
		w.parts[k] = pw
		w.mu.Unlock()
		if w.created != nil {
			w.created(pw)
		}
	}
	if r.Offset < pw.next {
		return nil
	}
	if pw.head == len(pw.entries) {
		pw.headSince = now
	}
	pw.next = r.Offset + 1
	e := &entry{rec: ownRecord(r), part: pw, size: recordSize(r)}
	pw.entries = append(pw.entries, e)
	if pw.settledAbove(r.Offset) {
		// Its outputs were committed above the watermark (above.go):
		// done, with nothing to write, and only its place held.
		e.state = entryDone
		e.holdPlace()
		w.charge(e, 1)
		w.done++
		return nil
	}
	w.charge(e, 1)
	return e
}

// A delivery whose outputs a commit wrote above its partition's
// watermark (above.go) is committed: nothing of it is left to write, and
// a read of its offset again skips it. The window keeps only its place,
// which the watermark passes once the deliveries before it are done: not
// its record's key, value and headers, its decoded copy or its outputs.
// A place is charged its real size and counts against the bytes budget
// only, not WindowRecords (deliveries polled, not yet committed). A slow
// receiver's attempt in flight holds its partition's watermark for up to
// its timeout; the partition's other endpoints go on meanwhile, and what
// they complete costs the window a place each once committed, so the
// partition does not reach its share (shareFetch) for work it has done
// (issue 26: healthy endpoints beside slow ones fell to 25–28% of their
// rate alone, the window full of deliveries already committed).

// placeSize is what a place costs: the entry (152 bytes) and the stub
// of its record (160) as the allocator rounds them, its slot in the
// partition's entries and its offset in the partition's committed-above
// set.
const placeSize = 352

// holdPlace keeps only e's place: its record becomes a stub that holds
// where it is, and its delivery and outputs go.
func (e *entry) holdPlace() {
	r := e.rec
	e.rec = &kgo.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, LeaderEpoch: r.LeaderEpoch}
	e.d, e.outs = nil, nil
	e.aboveDone = true
	e.size = placeSize
}

// counted is how many records e counts against WindowRecords: none once
// only its place is held.
func (e *entry) counted() int {
	if e.aboveDone {
		return 0
	}
	return 1
}

// recordCharge is e's part of its partition's bytes: its record's, not
// its outputs (the window's own bytes count those).
func (e *entry) recordCharge() int64 {
	if e.aboveDone {
		return placeSize
	}
	return recordSize(e.rec)
}

// charge adds e to the window's and its partition's charge (sign 1) or
// takes it off (sign -1). The window's bytes count e's outputs too.
func (w *window) charge(e *entry, sign int) {
	pw := e.part
	w.records += sign * e.counted()
	pw.records += sign * e.counted()
	w.bytes += int64(sign) * e.size
	pw.bytes += int64(sign) * e.recordCharge()
}

// placeOnly takes e's outputs, committed above the watermark, and its
// record off the window's charge, leaving its place.
func (w *window) placeOnly(e *entry) {
	w.charge(e, -1)
	e.holdPlace()
	w.charge(e, 1)
}

// finish records e's outputs; the next commit writes them once the
// watermark reaches e. They wait in the window until then, so they are
// charged to it with e (a retry or a deferral carries the payload a
// third time, beside the polled record and its decoded copy).
func (w *window) finish(e *entry, outs []*kgo.Record) {
	held := outputsSize(outs)
	e.state, e.outs = entryDone, outs
	e.size += held
	w.bytes += held
	w.done++
	w.fresh = append(w.fresh, e)
}

// outputOverhead is what an output record costs the window beyond its
// bytes (the record struct and its header slice).
const outputOverhead = 128

// outputsSize is what outs cost in memory while they wait for a commit.
func outputsSize(outs []*kgo.Record) int64 {
	var n int64
	for _, o := range outs {
		n += int64(recordBytes(o)) + outputOverhead
	}
	return n
}

// popDone removes pw's completed prefix, appending its outputs to outs,
// and returns the new watermark and whether it moved.
func (w *window) popDone(pw *partWindow, now time.Time, outs []*kgo.Record) ([]*kgo.Record, int64, bool) {
	start := pw.head
	end := start
	for end < len(pw.entries) && pw.entries[end].state == entryDone {
		end++
	}
	end = pw.wholeGroups(start, end)
	for pw.head < end {
		e := pw.entries[pw.head]
		outs = append(outs, e.outs...)
		pw.epoch = e.rec.LeaderEpoch
		if w.popped != nil {
			w.popped(e)
		}
		w.charge(e, -1)
		pw.entries[pw.head] = nil
		pw.head++
	}
	moved := pw.head > start
	if moved {
		pw.headSince = now
	}
	// Reclaim the popped prefix once it is most of the slice.
	if pw.head > 64 && pw.head*2 >= len(pw.entries) {
		n := copy(pw.entries, pw.entries[pw.head:])
		clear(pw.entries[n:])
		pw.entries = pw.entries[:n]
		pw.head = 0
	}
	return outs, pw.watermark(), moved
}

// wholeGroups returns where a pop of entries[start:end], all done, must
// end so that no batch formed from separate records (batch.go) is
// committed in part: before the first entry of a group with a member at
// or past the end. A group's entries are done together (one attempt), so
// it is popped whole once the prefix reaches its last member.
func (pw *partWindow) wholeGroups(start, end int) int {
	for {
		limit := pw.next
		if end < len(pw.entries) {
			limit = pw.entries[end].rec.Offset
		}
		cut := end
		for i := start; i < end; i++ {
			if g := pw.entries[i].group; g != nil && g.last >= limit {
				cut = i
				break
			}
		}
		if cut == end {
			return end
		}
		end = cut
	}
}

// watermark is the offset the partition may commit: its oldest
// uncommitted record, or the one after the last polled.
func (pw *partWindow) watermark() int64 {
	if pw.head < len(pw.entries) {
		return pw.entries[pw.head].rec.Offset
	}
	return pw.next
}

// oldest returns the partition's oldest uncommitted entry, or nil.
func (pw *partWindow) oldest() *entry {
	if pw.head < len(pw.entries) {
		return pw.entries[pw.head]
	}
	return nil
}

// release uncharges a dropped partition's entries from the window.
func (w *window) release(pw *partWindow) {
	for _, e := range pw.entries[pw.head:] {
		w.charge(e, -1)
	}
}

// A partition's share of the window. A commit cannot pass a partition's
// oldest uncommitted record, and one in flight is never spilled: one
// receiver hanging at the head of a busy partition holds everything
// polled behind it for up to its attempt timeout, and were the window
// one pool, those records would fill it and stop every partition's
// polls. So, once the window is half full, a partition is fetched only
// while it holds less than the room the window has left (in records and
// in bytes); a partition over that has its fetching paused (the Kafka
// client drops what it buffered for it and fetches it again on resume)
// until commits bring it back under. A lone busy partition may use half
// the window; k stuck partitions hold at most 1/2 + 1/4 + … of it, so
// with n partitions in the window at least 1/(n+1) of it stays free for
// the others, whatever hangs, and the window never exceeds its budget by
// more than one poll.

// fetchPauser pauses and resumes fetching (the session's *kgo.Client).
type fetchPauser interface {
	PauseFetchPartitions(map[string][]int32) map[string][]int32
	ResumeFetchPartitions(map[string][]int32)
}

// overShare reports whether pw holds more than its share of the window.
func (w *window) overShare(pw *partWindow) bool {
	records, bytes := w.held()
	if 2*records < w.maxRecords && 2*bytes < w.maxBytes {
		return false
	}
	return pw.records >= w.maxRecords-records || pw.bytes >= w.maxBytes-bytes
}

// shareFetch pauses the fetching of the partitions over their share and
// resumes that of the ones back under it (loop goroutine, before a
// poll).
func (e *engine) shareFetch() {
	if e.fetch == nil {
		return
	}
	var pause, resume map[string][]int32
	add := func(m *map[string][]int32, k tp) {
		if *m == nil {
			*m = map[string][]int32{}
		}
		(*m)[k.topic] = append((*m)[k.topic], k.partition)
	}
	for k, pw := range e.w.parts {
		switch over := e.w.overShare(pw); {
		case over && !pw.paused:
			pw.paused = true
			add(&pause, k)
		case !over && pw.paused:
			pw.paused = false
			add(&resume, k)
		}
	}
	if pause != nil {
		e.fetch.PauseFetchPartitions(pause)
	}
	if resume != nil {
		e.fetch.ResumeFetchPartitions(resume)
	}
}

// resumeDropped resumes the fetching of dropped partitions that were
// paused for their share: a pause outlives a revoke, and a partition
// assigned back, or rewound after an aborted commit, would stay paused.
func (e *engine) resumeDropped(pws []*partWindow) {
	var resume map[string][]int32
	for _, pw := range pws {
		if pw.paused {
			pw.paused = false
			if resume == nil {
				resume = map[string][]int32{}
			}
			resume[pw.k.topic] = append(resume[pw.k.topic], pw.k.partition)
		}
	}
	if resume != nil && e.fetch != nil {
		e.fetch.ResumeFetchPartitions(resume)
	}
}

// recordSize is what a polled record costs in memory: its bytes, and its
// value again for the decoded copy (protobuf copies bytes fields).
func recordSize(r *kgo.Record) int64 {
	n := len(r.Key) + 2*len(r.Value) + entryOverhead
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// ownRecord returns a copy of r that shares no memory with the fetch it
// came in: kgo decodes a batch's records into one slice whose keys,
// values and header values point into the batch's buffer, so one record
// kept (an attempt in flight to a slow receiver, a delivery waiting in
// its lane) would keep its whole batch in memory — every record of it
// the window has let go — whatever the window charges. One allocation
// holds the copied bytes.
func ownRecord(r *kgo.Record) *kgo.Record {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Value)
	}
	buf := make([]byte, 0, n)
	take := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		at := len(buf)
		buf = append(buf, b...)
		return buf[at:len(buf):len(buf)]
	}
	c := *r
	c.Key, c.Value = take(r.Key), take(r.Value)
	if r.Headers != nil {
		c.Headers = make([]kgo.RecordHeader, len(r.Headers))
		for i, h := range r.Headers {
			c.Headers[i] = kgo.RecordHeader{Key: h.Key, Value: take(h.Value)}
		}
	}
	return &c
}
