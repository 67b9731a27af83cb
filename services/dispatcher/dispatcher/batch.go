package dispatcher

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/batchrec"
	"github.com/hookline/hookline/platform/endpoints"
	"github.com/hookline/hookline/platform/keyring"
	"github.com/hookline/hookline/sdk/batch"
	"github.com/hookline/hookline/services/dispatcher/health"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
)

// Batched delivery (issue 30; docs/DESIGN.md, "Batched delivery").
//
// An endpoint with batch settings receives its deliveries in batches: when
// its lane may start an attempt, the head waits (up to max_wait) until
// max_events are waiting or max_bytes of payload, then the lane takes up
// to that many members, in order, and the batch is formed: one delivery
// record of its own (Delivery.batch) whose payload is the body every
// attempt sends (sdk/batch) and whose id, derived from its members'
// delivery ids, is the webhook-id. From then on a batch is a delivery
// like any other: attempted, classified, retried on the endpoint's ladder
// and budgets, paused, held, spilled and rate-limited as one unit (one
// request against max_in_flight and the rate limit), its record size-
// checked (I33) and authenticated (its MAC covers its members) — so a
// retry sends the same members and body. Only its records differ: each
// member gets its own result of each attempt (with the batch's id) and,
// at the end, its own dead letter (writer.go's resultRecords and
// deadLetter ask memberResults and memberDeadLetters).
//
// At formation the members are separate records of the deliveries
// topic: the batch's first attempt runs as if the batch's record had
// been read at the first member's place (batchRecord), and its outputs —
// the members' results, the batch's retry — commit in the same
// transaction as every member's offset: a batch's entries are committed
// whole or not at all (window.go's wholeGroups, above.go), so a crash
// never keeps a member both in a committed batch and in the partition
// still to read (two terminal results) nor commits a member without the
// batch that carries it on (a loss).
//
// What is not batched: an operator's resend or test event (one attempt
// of one delivery with its own id: I12), and ordered endpoints (refused
// with a batch by the API until ordered lanes batch their heads).

// batching is an endpoint's batch settings, defaults applied; the zero
// value is off.
type batching struct {
	maxEvents int
	maxBytes  int64
	maxWait   time.Duration
}

// batchEventType is a batch record's event type: its members have theirs.
const batchEventType = "batch"

// batchingOf returns ep's batch settings; off for an ordered endpoint.
func batchingOf(ep *hooklinev1.EndpointRecord) batching {
	b := ep.GetEndpoint().GetBatch()
	if b.GetMaxEvents() < 2 || orderedEndpoint(ep) {
		return batching{}
	}
	// Clamped to what ingest allows (platform/endpoints): a record
	// written before it checked them asks for no more.
	out := batching{maxEvents: int(min(b.GetMaxEvents(), endpoints.MaxBatchEvents)), maxBytes: int64(b.GetMaxBytes()), maxWait: endpoints.DefaultBatchWait}
	if out.maxBytes <= 0 {
		out.maxBytes = endpoints.DefaultBatchBytes
	}
	out.maxBytes = min(out.maxBytes, endpoints.MaxBatchBytes)
	if b.GetMaxWait() != nil {
		out.maxWait = min(max(b.GetMaxWait().AsDuration(), 0), endpoints.MaxBatchWait)
	}
	return out
}

func (b batching) on() bool { return b.maxEvents > 1 }

// orderedEndpoint reports whether ep delivers in order.
func orderedEndpoint(ep *hooklinev1.EndpointRecord) bool {
	o := ep.GetEndpoint().GetOrdering()
	return o == hooklinev1.Ordering_ORDERING_PER_ENDPOINT || o == hooklinev1.Ordering_ORDERING_PER_KEY
}

// batchable reports whether d may join a batch being formed: not a batch
// already, not an operator's one-off.
func batchable(d *hooklinev1.Delivery) bool {
	if d == nil || d.GetBatch() != nil {
		return false
	}
	k := d.GetKind()
	return k != hooklinev1.DeliveryKind_DELIVERY_KIND_RESEND && k != hooklinev1.DeliveryKind_DELIVERY_KIND_TEST
}

// batchReady reports whether a batching lane's head may start now, and
// if not, when it may: once max_events are waiting, or max_bytes of them,
// or once the head has waited max_wait.
func (l *lane) batchReady(now time.Time) (bool, time.Time) {
	if !l.batch.on() || l.ord != nil {
		return true, time.Time{}
	}
	head := l.peek()
	if head == nil || !batchable(head.d) || l.queued >= l.batch.maxEvents || l.qpayload >= l.batch.maxBytes {
		return true, time.Time{}
	}
	due := head.queuedAt.Add(l.batch.maxWait)
	if !now.Before(due) {
		return true, time.Time{}
	}
	return false, due
}

// gather pops, behind head (popped already), the members that join its
// batch: batchable deliveries in lane order while the batch has room.
func (l *lane) gather(head *entry) []*entry {
	members := []*entry{head}
	bytes := int64(len(head.d.GetPayload()))
	for len(members) < l.batch.maxEvents {
		next := l.peek()
		if next == nil || !batchable(next.d) || next.part != head.part {
			break // a batch commits in one partition's offsets (batchGroup)
		}
		n := int64(len(next.d.GetPayload()))
		if bytes+n > l.batch.maxBytes {
			break
		}
		l.pop()
		members = append(members, next)
		bytes += n
	}
	return members
}

// batchGroup is the entries of a batch formed from separate records: its
// outputs and their offsets commit whole or not at all.
type batchGroup struct {
	first, last int64 // the lowest and highest member offsets
}

// atWatermark reports whether en belongs to a batch whose first member
// is its partition's watermark (popDone stopped there: a member is past
// an entry not done yet). Such a batch is not committed above the
// watermark: the metadata names only offsets strictly above it (the
// reader refuses the rest, and would skip nothing: every settlement
// committed above done again, make sim seed 17), so the batch waits for
// the watermark to pass it whole.
func (en *entry) atWatermark() bool {
	return en.group != nil && en.group.first <= en.part.watermark()
}

// group marks members as one batch's entries for the commit.
func group(members []*entry) {
	if len(members) < 2 {
		return
	}
	g := &batchGroup{first: members[0].rec.Offset, last: members[0].rec.Offset}
	for _, m := range members {
		g.first, g.last = min(g.first, m.rec.Offset), max(g.last, m.rec.Offset)
		m.group = g
	}
}

// attemptBatch is the handling of the batch its lane formed of members
// (in order): each member's payload held by reference is read back, the
// batch's record made (formBatch), and one attempt made as if that record
// had been read at the first member's place. A member whose payload
// cannot be read back leaves the batch before it is formed (held again,
// or ended, as unreadHeld decides); one interrupted before the attempt
// goes back as it came. The outputs are the whole group's: they commit
// together (batchGroup). formed is the answer key of the batch made, for
// the commit to forget (nil when none was).
//
// probe says outage mode let the batch through as its endpoint's probe:
// the turn is taken here and ended on every way out, as attemptRecord
// does for one delivery — a batch whose members were all set aside or
// interrupted before the attempt ends it too (DESIGN I24: every probe
// ends).
func (h *handler) attemptBatch(ctx context.Context, members []*entry, ep *hooklinev1.EndpointRecord, probe bool) (outs []*kgo.Record, formed *answerKey) {
	var p *health.ProbeTurn
	if probe {
		p = h.rcv.Turn(ep.GetEndpoint().GetId())
		defer func() { p.Over(h.now()) }()
	}
	ds := make([]*hooklinev1.Delivery, 0, len(members))
	var first *kgo.Record
	for _, m := range members {
		if _, why := h.writer.unwritableReason(m.rec); why != "" {
			// Blamed for an abort, alone or in a batch: set aside on
			// its own (process does), the others go on.
			outs = append(outs, h.process(ctx, m.rec, func(context.Context) []*kgo.Record { return nil })...)
			continue
		}
		if err := h.holds.readHeld(ctx, m.d); err != nil {
			if ctx.Err() != nil {
				outs = append(outs, requeue(m.rec, h.topics.Deliveries))
				continue
			}
			outs = append(outs, h.process(ctx, m.rec, func(ctx context.Context) []*kgo.Record { return h.holds.unreadHeld(ctx, m.rec, m.d, err) })...)
			continue
		}
		ds = append(ds, m.d)
		if first == nil {
			first = m.rec
		}
	}
	if len(ds) == 0 {
		return outs, nil
	}
	if ctx.Err() != nil { // interrupted before the attempt: every member back as it came
		for _, m := range members {
			if slices.Contains(ds, m.d) {
				outs = append(outs, requeue(m.rec, h.topics.Deliveries))
			}
		}
		return outs, nil
	}
	bd := formBatch(h.keys, ds)
	rec := batchRecord(first, bd)
	key := answerKeyOf(rec, bd)
	return append(outs, h.process(ctx, rec, func(ctx context.Context) []*kgo.Record { return h.attempter.attempt(ctx, rec, bd, ep, p) })...), &key
}

// formBatch returns the batch of ds, in order: its id derived from their
// delivery ids, the body, the members without their payloads, and its
// budgets: the highest attempt number among them and the earliest first
// attempt and give-up time any of them has, so no member's budget is
// stretched by batching. Its MAC is made under the secrets key file.
func formBatch(keys *keyring.Keyring, ds []*hooklinev1.Delivery) *hooklinev1.Delivery {
	ids := make([]string, len(ds))
	wire := make([]batch.Member, len(ds))
	members := make([]*hooklinev1.Delivery, len(ds))
	head := ds[0]
	bd := &hooklinev1.Delivery{
		TenantId: head.GetTenantId(), EndpointId: head.GetEndpointId(), EventType: batchEventType,
		Kind: head.GetKind(), CreatedAt: head.GetCreatedAt(),
	}
	for i, d := range ds {
		ids[i] = d.GetDeliveryId()
		wire[i] = batch.Member{ID: d.GetEventId(), Type: d.GetEventType(), Timestamp: d.GetCreatedAt().AsTime(), Payload: d.GetPayload()}
		members[i] = &hooklinev1.Delivery{
			DeliveryId: d.GetDeliveryId(), EventId: d.GetEventId(), TenantId: d.GetTenantId(), EndpointId: d.GetEndpointId(),
			EventType: d.GetEventType(), Attempt: d.GetAttempt(), CreatedAt: d.GetCreatedAt(), Kind: d.GetKind(),
			IdempotencyKey: d.GetIdempotencyKey(), OrderingKey: d.GetOrderingKey(),
			FirstAttemptAt: d.GetFirstAttemptAt(), GiveUpAt: d.GetGiveUpAt(),
		}
		bd.Attempt = max(bd.GetAttempt(), d.GetAttempt())
		if t := d.GetCreatedAt(); t != nil && (bd.CreatedAt == nil || t.AsTime().Before(bd.GetCreatedAt().AsTime())) {
			bd.CreatedAt = t
		}
		if t := d.GetFirstAttemptAt(); t != nil && (bd.FirstAttemptAt == nil || t.AsTime().Before(bd.GetFirstAttemptAt().AsTime())) {
			bd.FirstAttemptAt = t
		}
		if t := d.GetGiveUpAt(); t != nil && (bd.GiveUpAt == nil || t.AsTime().Before(bd.GetGiveUpAt().AsTime())) {
			bd.GiveUpAt = t
		}
	}
	bd.Attempt = max(bd.GetAttempt(), 1)
	bd.DeliveryId = batch.ID(ids)
	bd.EventId = bd.DeliveryId
	bd.Payload = batch.Encode(wire)
	bd.Batch = &hooklinev1.Batch{Members: members}
	keys.AuthenticateDelivery(bd, keyring.PayloadSum(bd.GetPayload()))
	return bd
}

// batchRecord is the record of bd as if it had been read at first's
// place: what the handling of a record uses (its process span from
// first's trace headers, a requeue or a worker fault writing bd back, the
// answers kept by place) sees the batch. Its topic is formedTopic, not
// the deliveries topic: no record of the batch is there yet, so a hold
// keeps its payload rather than name this place (heldCopy).
func batchRecord(first *kgo.Record, bd *hooklinev1.Delivery) *kgo.Record {
	value, err := proto.Marshal(bd)
	if err != nil {
		panic(err) // a message Hookline built
	}
	return &kgo.Record{
		Topic: formedTopic, Key: first.Key, Value: value, Headers: slices.Clone(first.Headers),
		Partition: first.Partition, Offset: first.Offset, LeaderEpoch: first.LeaderEpoch, Timestamp: first.Timestamp,
	}
}

// formedTopic is the topic of a batch's record while it is formed from
// separate records (batchRecord): a name no Kafka topic has.
const formedTopic = "(batch being formed)"

// batchHeader is the header of an attempt of d that says it is a batch
// of n members, or nil.
func batchHeader(d *hooklinev1.Delivery) http.Header {
	h := http.Header{}
	if n := len(d.GetBatch().GetMembers()); n > 0 {
		h.Set(batch.HeaderSize, strconv.Itoa(n))
	}
	return h
}

// blameMembers marks the members of every batch blamed for an abort
// (its retry, deferral or park refused): formed again from their own
// records after the abort, with whatever joins them, they would make a
// new batch of another id to be refused again; each is set aside on its
// own instead (attemptBatch).
func (w *recordWriter) blameMembers(failed []refused, blamed map[string]string, now time.Time) {
	for _, f := range failed {
		if f.R == nil || !w.carriesOn(f.R.Topic) {
			continue
		}
		d, err := decodeDelivery(f.R)
		if err != nil || d.GetBatch() == nil {
			continue
		}
		why, ok := blamed[d.GetDeliveryId()]
		if !ok {
			continue
		}
		for _, m := range d.GetBatch().GetMembers() {
			w.unwritable.Mark(m.GetDeliveryId(), why, now)
		}
	}
}

// unwritableOf says why d was marked unwritable, or "": a batch is when
// it or any of its members was (a member's result refused).
func (w *recordWriter) unwritableOf(d *hooklinev1.Delivery) string {
	if why := w.unwritable.Reason(d.GetDeliveryId()); why != "" {
		return why
	}
	for _, m := range d.GetBatch().GetMembers() {
		if why := w.unwritable.Reason(m.GetDeliveryId()); why != "" {
			return why
		}
	}
	return ""
}

// memberResults returns the records of res, the result of batch d:
// each member's (platform/batchrec), reporting the span in ctx.
func (w *recordWriter) memberResults(ctx context.Context, d *hooklinev1.Delivery, res *hooklinev1.AttemptResult) []*kgo.Record {
	var out []*kgo.Record
	for _, mr := range batchrec.Results(d, res) {
		out = append(out, w.resultRecords(ctx, nil, mr)...)
	}
	return out
}

// memberDeadLetters returns the records of each member's dead letter of
// batch d, ended with res (platform/batchrec).
func (w *recordWriter) memberDeadLetters(d *hooklinev1.Delivery, res *hooklinev1.AttemptResult) []*kgo.Record {
	var out []*kgo.Record
	for _, dl := range batchrec.DeadLetters(d, res, w.now()) {
		out = append(out, w.records(w.topics.Dead, d.GetEndpointId(), dl)...)
	}
	return out
}
