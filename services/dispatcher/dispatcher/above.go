package dispatcher

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Completed deliveries above the watermark (docs/DESIGN.md, "What a
// crash, a rebalance or an outage re-POSTs": the watermark gap). A
// commit cannot move a partition's offset past its oldest delivery not
// done, so deliveries read after one that waits (behind its endpoint's
// cap, in flight to a slow receiver) complete and used to wait,
// uncommitted, for the watermark: a crash or a revoke had the next owner
// POST them all again. Now a commit also writes the outputs of the
// completed deliveries above the watermark, and names their offsets in
// the offset commit's metadata, in the same transaction (as Confluent's
// parallel consumer does): whoever reads the partition from that
// committed offset — the next owner, or this dispatcher after its window
// was dropped — skips them (window.add). What a crash re-POSTs is then
// what was in flight plus what completed since the last commit.
//
// A delivery whose settlement changes its ordered lane is committed
// above the watermark too, its lane change with it: the lanes topic says
// which members are outside as of the committed settlements, and a
// reader skips exactly the records whose settlements those are, so the
// two agree (docs/DESIGN.md, "Ordered delivery": the lanes topic follows
// the committed settlements). Not above-committed: offsets beyond what
// the metadata holds (aboveMetaMax bytes: Kafka's
// offset.metadata.max.bytes is 4096 by default); they wait for the
// watermark as before. The metadata is only ever read as a set of
// offsets whose outputs are committed: a reader that cannot parse it
// skips nothing (duplicates, never a loss).

// aboveMetaPrefix marks the offset commit metadata this file writes.
const aboveMetaPrefix = "hl1:"

// aboveMetaMax bounds the metadata of one partition's offset commit.
const aboveMetaMax = 3000

// encodeAbove encodes offs (ascending, each above base) relative to
// base as runs "gap.length" in base 36, comma-separated, and returns the
// encoding and how many of offs it holds (a prefix), within max bytes.
func encodeAbove(base int64, offs []int64, max int) (string, int) {
	if len(offs) == 0 {
		return "", 0
	}
	var b strings.Builder
	b.WriteString(aboveMetaPrefix)
	held := 0
	prev := base // the offset after the last run ends, relative to which the next gap counts
	for i := 0; i < len(offs); {
		j := i + 1
		for j < len(offs) && offs[j] == offs[j-1]+1 {
			j++
		}
		run := strconv.FormatInt(offs[i]-prev, 36) + "." + strconv.FormatInt(int64(j-i), 36)
		if held > 0 {
			run = "," + run
		}
		if b.Len()+len(run) > max {
			break
		}
		b.WriteString(run)
		held = j
		prev = offs[j-1] + 1
		i = j
	}
	if held == 0 {
		return "", 0
	}
	return b.String(), held
}

// decodeAbove returns the offsets meta names above base, ascending; ok
// is false (and nothing returned) for metadata this file did not write
// or cannot read.
func decodeAbove(base int64, meta string) (offs []int64, ok bool) {
	rest, found := strings.CutPrefix(meta, aboveMetaPrefix)
	if !found || rest == "" {
		return nil, meta == ""
	}
	prev := base
	for run := range strings.SplitSeq(rest, ",") {
		g, l, found := strings.Cut(run, ".")
		gap, err1 := strconv.ParseInt(g, 36, 64)
		n, err2 := strconv.ParseInt(l, 36, 64)
		if !found || err1 != nil || err2 != nil || gap < 0 || n < 1 || n > 1<<20 || len(offs)+int(n) > 1<<20 {
			return nil, false
		}
		start := prev + gap
		if start <= base || start < prev {
			return nil, false
		}
		for k := range n {
			offs = append(offs, start+k)
		}
		prev = start + n
	}
	return offs, true
}

// skips are, per partition, the offsets above its committed offset
// whose outputs are committed: read from the group's committed offsets
// on an assignment (the group's goroutine), and kept from this
// dispatcher's own commits (the loop), for the partition's next window.
// Safe for concurrent use.
type skips struct {
	mu sync.Mutex
	m  map[tp][]int64
}

func (s *skips) set(k tp, offs []int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[tp][]int64{}
	}
	if len(offs) == 0 {
		delete(s.m, k)
		return
	}
	s.m[k] = slices.Clone(offs)
}

func (s *skips) get(k tp) []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.m[k])
}

// settledAbove reports whether the delivery at off was committed above
// the watermark (pw.above is ascending).
func (pw *partWindow) settledAbove(off int64) bool {
	_, found := slices.BinarySearch(pw.above, off)
	return found
}

// trimAbove forgets the offsets the watermark passed.
func (pw *partWindow) trimAbove() {
	mark := pw.watermark()
	i, _ := slices.BinarySearch(pw.above, mark)
	if i > 0 {
		pw.above = slices.Delete(pw.above, 0, i)
	}
}

// commitAbove adds to a commit being built the outputs of the deliveries
// completed above their partition's watermark (w.fresh), as many as each
// partition's metadata holds, and returns each partition's metadata
// (parts gains the partitions whose outputs it added). The entries it
// takes wait for the commit's end (aboveEnded).
func (c *committer) commitAbove(outs []*kgo.Record, parts []hkafka.TopicPartition, marks map[string]map[int32]kgo.EpochOffset) ([]*kgo.Record, []hkafka.TopicPartition, map[tp]string) {
	byPart := map[*partWindow][]*entry{}
	var keep []*entry
	for _, en := range c.w.fresh {
		pw := en.part
		if pw.dropped || c.w.parts[pw.k] != pw || en.state != entryDone || en.aboveTxn || en.aboveDone || en.rec.Offset < pw.watermark() {
			continue // gone, popped, or taken already
		}
		if en.atWatermark() {
			continue // a batch the watermark stopped at: committed through it (window.popDone)
		}
		byPart[pw] = append(byPart[pw], en)
	}
	metas := map[tp]string{}
	for k, pw := range c.w.parts {
		pw.trimAbove()
		ens := byPart[pw]
		merged := slices.Clone(pw.above)
		for _, en := range ens {
			merged = append(merged, en.rec.Offset)
		}
		slices.Sort(merged)
		base := marks[k.topic][k.partition].Offset
		meta, held := encodeAbove(base, merged, aboveMetaMax)
		if cut := wholeGroupsAbove(merged, held, ens); cut < held {
			held = cut
			meta, _ = encodeAbove(base, merged[:held], aboveMetaMax)
		}
		pw.above = merged[:held]
		metas[k] = meta
		added := false
		for _, en := range ens {
			if !pw.settledAbove(en.rec.Offset) {
				keep = append(keep, en) // no room in the metadata: waits for the watermark
				continue
			}
			outs = append(outs, en.outs...)
			en.aboveTxn = true
			c.txnAbove = append(c.txnAbove, en)
			if en.opKey != nil {
				c.lanes.add(en) // its lane change commits with it (laneCommit.outputs)
			}
			added = true
		}
		if p := (hkafka.TopicPartition{Topic: k.topic, Partition: k.partition}); added && !slices.Contains(parts, p) {
			parts = append(parts, p)
		}
	}
	clear(c.w.fresh)
	c.w.fresh = append(c.w.fresh[:0], keep...)
	return outs, parts, metas
}

// wholeGroupsAbove returns how many of merged (ascending offsets above
// the watermark, the first held of them named in the commit's metadata)
// the commit may name so that no batch formed from separate records
// (batch.go) commits in part: the cut moves back before the first member
// of any group, among ens, with a member past it.
func wholeGroupsAbove(merged []int64, held int, ens []*entry) int {
	var groups map[int64]*batchGroup // built only when a batch is among ens
	for _, en := range ens {
		if en.group != nil {
			if groups == nil {
				groups = map[int64]*batchGroup{}
			}
			groups[en.rec.Offset] = en.group
		}
	}
	if groups == nil {
		return held
	}
	for held < len(merged) {
		limit := merged[held]
		cut := held
		for i, off := range merged[:held] {
			if g := groups[off]; g != nil && g.last >= limit {
				cut = i
				break
			}
		}
		if cut == held {
			break
		}
		held = cut
	}
	return held
}

// withAbove sets each partition's metadata in an offset commit.
func withAbove(req *kmsg.TxnOffsetCommitRequest, metas map[tp]string) {
	for i := range req.Topics {
		t := &req.Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			m := metas[tp{t.Topic, p.Partition}]
			p.Metadata = &m
		}
	}
}

// aboveEnded takes a commit's end for the entries it committed above
// their watermark: committed, their outputs are released and the
// partitions' sets kept for their next windows; aborted, they are
// candidates again (their partitions' sets lose them).
func (c *committer) aboveEnded(committed bool) {
	if committed {
		c.answered(c.txnAbove)
	}
	for _, en := range c.txnAbove {
		en.aboveTxn = false
		pw := en.part
		if committed {
			if en.state == entryDone { // not dropped with its partition meanwhile (sweep uncharged it)
				c.w.placeOnly(en)
			}
			continue
		}
		if i, found := slices.BinarySearch(pw.above, en.rec.Offset); found {
			pw.above = slices.Delete(pw.above, i, i+1)
		}
		if !pw.dropped {
			c.w.fresh = append(c.w.fresh, en)
		}
	}
	clear(c.txnAbove)
	c.txnAbove = c.txnAbove[:0]
	if committed {
		for k, pw := range c.w.parts {
			c.skip.set(k, pw.above)
		}
	}
}

// seedSkips is the assignment callback's part: it hands the loop the
// offsets the committed offsets' metadata names as committed above them
// (committed, read by the callback). A read that failed skips nothing
// the loop does not already know (duplicates, never a loss).
func (s *Service) seedSkips(e *engine, assigned map[string][]int32, committed kadm.OffsetResponses) {
	topic := s.topics.Deliveries
	for _, p := range assigned[topic] {
		c, ok := committed.Lookup(topic, p)
		if !ok || c.Err != nil {
			continue
		}
		s.answered.forgetCommitted(p, c.At) // kept by a journal from before a crash
		offs, ok := decodeAbove(c.At, c.Metadata)
		if !ok {
			s.log.Warn("offset commit metadata not understood; skipping nothing", "partition", p, "metadata", c.Metadata)
			continue
		}
		e.c.skip.set(tp{topic, p}, offs)
	}
}
