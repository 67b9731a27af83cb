package e2e

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// simTrailDeliveries is how many stalled deliveries a stall dump traces.
const simTrailDeliveries = 3

// trail writes, for each delivery id, every committed record of the
// world's topics that names it (in its key or value), in the order
// they were written: where a stalled delivery went — spilled, held, parked,
// moved through the delay tiers, named outside by its lane — without
// rerunning the seed with more logging.
func (w *simWorld) trail(ctx context.Context, b *bytes.Buffer, ids []string) {
	if len(ids) == 0 {
		return
	}
	prefix := w.st.kafka.TopicPrefix
	listed, err := w.st.admin.ListTopics(ctx)
	if err != nil {
		fmt.Fprintf(b, "\ntrail: topics not listed: %v\n", err)
		return
	}
	var topics []string
	for _, t := range listed.Names() {
		if strings.HasPrefix(t, prefix) {
			topics = append(topics, t)
		}
	}
	opts, err := w.st.kafka.Opts()
	if err != nil {
		fmt.Fprintf(b, "\ntrail: %v\n", err)
		return
	}
	// Up to the ends as of now: a world still running (a blocked lane's
	// members go round its retry path for as long as it is blocked)
	// never stops writing. A partition is read to its end when its last
	// record before the end is read, or one written since (its end may
	// be a transaction's marker, which a consumer never sees).
	began := time.Now()
	ends, err := w.st.admin.ListEndOffsets(ctx, topics...)
	if err != nil {
		fmt.Fprintf(b, "\ntrail: end offsets: %v\n", err)
		return
	}
	left := map[string]map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Offset > 0 {
			if left[o.Topic] == nil {
				left[o.Topic] = map[int32]int64{}
			}
			left[o.Topic][o.Partition] = o.Offset
		}
	})
	cl, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(topics...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		fmt.Fprintf(b, "\ntrail: %v\n", err)
		return
	}
	defer cl.Close()
	found := map[string][]string{}
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			if _, ok := left[r.Topic][r.Partition]; ok {
				n++ // a record of a partition not read to its end yet
			}
			if r.Offset+1 >= left[r.Topic][r.Partition] || r.Timestamp.After(began) {
				delete(left[r.Topic], r.Partition)
				if len(left[r.Topic]) == 0 {
					delete(left, r.Topic)
				}
			}
			for _, id := range ids {
				if bytes.Contains(r.Value, []byte(id)) || bytes.Contains(r.Key, []byte(id)) {
					var hs []string
					for _, h := range r.Headers {
						hs = append(hs, h.Key)
					}
					found[id] = append(found[id], fmt.Sprintf("%s %s[%d]@%d key %q, %d bytes, headers %v%s",
						r.Timestamp.UTC().Format("15:04:05.000"), strings.TrimPrefix(r.Topic, prefix), r.Partition, r.Offset, r.Key, len(r.Value), hs, w.laneMembers(r)))
				}
			}
		})
		if n == 0 || len(left) == 0 || ctx.Err() != nil {
			break
		}
	}
	for _, id := range ids {
		lines := found[id]
		sort.Strings(lines)
		fmt.Fprintf(b, "\ntrail of %s (%d committed records name it):\n", id, len(lines))
		for _, l := range lines {
			fmt.Fprintf(b, "  %s\n", l)
		}
	}
}

// laneMembers lists the members a lanes record names outside (delivery
// id, lane_seq, blocked), or "" for a record of another topic.
func (w *simWorld) laneMembers(r *kgo.Record) string {
	if r.Topic != w.st.topics.Lanes {
		return ""
	}
	var rec hooklinev1.LaneRecord
	if err := hkafka.Decode(r, &rec); err != nil {
		return fmt.Sprintf("; undecodable: %v", err)
	}
	var out []string
	for _, m := range rec.GetOutside() {
		s := fmt.Sprintf("%s@%d", m.GetDeliveryId(), m.GetLaneSeq())
		if m.GetBlocked() != nil {
			s += "(blocked)"
		}
		out = append(out, s)
	}
	return fmt.Sprintf("; outside %v", out)
}

// trailSlowest logs the trails of the n deliveries that ended last: what
// kept a seed that passed near its liveness bound slow (make sim
// TRAIL_SLOWEST=n).
func (w *simWorld) trailSlowest(n int) {
	w.model.mu.Lock()
	var ended []*simMember
	for _, m := range w.members {
		if m.accepted && !m.ended.IsZero() {
			ended = append(ended, m)
		}
	}
	sort.Slice(ended, func(i, j int) bool { return ended[i].ended.After(ended[j].ended) })
	var ids []string
	for _, m := range ended[:min(n, len(ended))] {
		ids = append(ids, m.deliveryID)
		w.t.Logf("seed %d: slowest: %s (%s, plan %v) ended +%v after %d POSTs", w.seed, m.id, m.deliveryID, m.plan,
			m.ended.Sub(w.model.t0).Round(time.Millisecond), m.posts)
	}
	w.model.mu.Unlock()
	var b bytes.Buffer
	w.trail(w.t.Context(), &b, ids)
	w.t.Logf("seed %d: trails of the %d deliveries that ended last:%s", w.seed, len(ids), b.String())
}
