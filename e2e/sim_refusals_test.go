package e2e

import (
	"context"
	"math/rand/v2"
	"time"

	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A topic whose max.message.bytes an operator lowered for a while: for
// the window, every broker refuses a produce batch to the topic that is
// larger than the limit with MESSAGE_TOO_LARGE, partition by partition
// (as a real broker does: the other partitions of the request are
// written). The produce-err fault refuses whole requests whatever they
// hold; this one refuses only big records, so the deliveries it makes
// unwritable are the ones the engine must set aside wherever they are
// when they come again — a lane's head, a held delivery, an outage
// probe (issue 24 item 3's combination, which the produce-err fault
// almost never draws). Half the seeds get one window, drawn from a
// stream of their own so the rest of a seed's schedule stays what it was.

// simRefusalTopics are the topics whose records carry a payload.
func (w *simWorld) simRefusalTopics() []string {
	t := w.st.topics
	return []string{t.Retries, t.Retries, t.Deliveries, t.Parked, t.Dead}
}

// drawRefusals draws the seed's refusal window, if it has one, and with
// it a burst of big events to one endpoint whose receiver fails each
// of them twice before a 2xx (swarm testing: the features a window
// exercises, drawn together so a seed meets them at once): the endpoint
// goes into outage mode, its deliveries are held and probed, and the
// records that carry them on are big enough to be refused — a held
// delivery, a probe, a retry set aside wherever it is.
func (w *simWorld) drawRefusals(seed uint64) []simFault {
	r := rand.New(rand.NewPCG(seed, 0x70091e))
	if r.IntN(2) != 0 {
		return nil
	}
	topics := w.simRefusalTopics()
	topic := topics[r.IntN(len(topics))]
	limit := hkafka.BigRecord + r.IntN(192<<10) // a batch over it is refused: 64-256 KiB
	at := time.Second + time.Duration(r.Int64N(int64(w.phase/2)))
	d := 2*time.Second + time.Duration(r.Int64N(int64(w.phase/2)))
	w.drawBigBurst(r, at-2*time.Second, at+d, limit)
	return []simFault{{at: at, kind: "big-record-refused", apply: func(ctx context.Context, w *simWorld) {
		w.refuseBigRecords(ctx, topic, limit, d)
	}}}
}

// drawBigBurst makes every event one endpoint gets between from and to
// bigger than limit (by up to 64 KiB) and fail twice (503) before its
// 2xx, or once when its endpoint allows two attempts only.
func (w *simWorld) drawBigBurst(r *rand.Rand, from, to time.Duration, limit int) {
	ep := w.eps[r.IntN(len(w.eps))]
	w.burstEp = ep
	n := 0
	for _, m := range w.members {
		if m.ep != ep || m.at < from || m.at > to {
			continue
		}
		m.size = limit + 1<<10 + r.IntN(64<<10)
		m.plan = []simStep{sim503, sim503, simOK}
		if ep.maxAttempts < 3 {
			m.plan = []simStep{sim503, simOK}
		}
		n++
	}
	w.t.Logf("seed %d: %d events of %s between +%v and +%v are over %d bytes and fail twice first", w.seed, n, ep.name, from, to, limit)
}

// refuseBigRecords refuses, for d (or until ctx ends), every produce
// batch to topic over limit bytes, and counts each refused request as a
// destructive fault and a move of work (each aborts the commit carrying
// it, as a produce-err refusal does).
func (w *simWorld) refuseBigRecords(ctx context.Context, topic string, limit int, d time.Duration) {
	info := w.c.TopicInfo(topic)
	if info == nil {
		w.t.Logf("fault: %s does not exist; nothing refused", topic)
		return
	}
	var faults []kfake.Fault
	for p := range int32(w.st.kafka.Partitions) {
		faults = append(faults, kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Partitions: []int32{p},
			Err: kerr.MessageTooLarge, Count: -1, When: batchOver(topic, info.TopicID, p, limit)})
	}
	h := w.c.Fault(faults...)
	w.t.Logf("fault: %s refuses batches over %d bytes for %v", topic, limit, d)
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	h.Remove()
	n, big := h.Hits(), w.acceptedOver(limit)
	w.mu.Lock()
	w.counts["big-record-refused"]++
	// For the storm bound, the window is one fault plus one for each
	// accepted event over its limit: each such record may be refused and
	// its delivery blamed and set aside once, as a produce-err fault's
	// refusal is. Not the refused requests: a scheduler or dispatcher
	// that aborts in a loop behind one refused record (issue 24 item 6)
	// would raise its own bound. The duplicates bound (moves of work)
	// counts every refused request: each drops a window.
	w.destructs += 1 + big
	w.refusals += n
	w.mu.Unlock()
	w.t.Logf("fault: %s takes batches of any size again (%d produce requests refused; %d accepted events over %d bytes)", topic, n, big, limit)
}

// acceptedOver counts the accepted events whose payload is over limit.
func (w *simWorld) acceptedOver(limit int) int {
	w.model.mu.Lock()
	defer w.model.mu.Unlock()
	n := 0
	for _, m := range w.members {
		if m.accepted && m.size > limit {
			n++
		}
	}
	return n
}

// batchOver matches a produce request whose batch for topic's partition
// p is over limit bytes (Kafka checks max.message.bytes per batch). A
// request names the topic or, from produce v13, only its id.
func batchOver(topic string, id [16]byte, p int32, limit int) func(kmsg.Request) bool {
	return func(r kmsg.Request) bool {
		req, ok := r.(*kmsg.ProduceRequest)
		if !ok {
			return false
		}
		for _, t := range req.Topics {
			if t.Topic != topic && t.TopicID != id {
				continue
			}
			for _, part := range t.Partitions {
				if part.Partition == p && len(part.Records) > limit {
					return true
				}
			}
		}
		return false
	}
}
