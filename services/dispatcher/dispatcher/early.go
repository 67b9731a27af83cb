package dispatcher

import (
	"container/heap"
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Clock skew between scheduler and dispatcher (I6, docs/DESIGN.md). The
// scheduler releases a delivery when its due_at is not after the
// scheduler's clock; the dispatcher attempts it only when its due time
// is not after the dispatcher's clock. A scheduler whose clock is ahead
// releases deliveries the dispatcher finds not due yet. Sent straight
// back, such a delivery would be released again at once, a hop loop at
// full speed for as long as the skew. Instead:
//
//   - read at most EarlyHold (--early-hold, the clock-skew tolerance)
//     before its due time, it waits in the dispatcher's memory until it
//     is due, then is placed like any delivery: it stays in the window
//     (charged to it, its partition's watermark held) and nothing is
//     written for it meanwhile;
//   - read earlier than that, it goes back to the retries topic with a
//     due_at the scheduler will honour: the due time it was read at plus
//     how early it was (so the scheduler, ahead by at least that much,
//     holds it until the dispatcher's clock has about reached its due
//     time), and at least double the previous push, so a skew that grew
//     or a lag that hid it costs a few more hops (log2 of the skew over
//     the first push), never a loop. Its own due time travels in the
//     headerEarly header, bound to the due_at written beside it, and
//     is what this dispatcher compares with its clock when it comes back:
//     never early by the dispatcher's clock, late by at most the push.
//
// A scheduler whose clock is behind only releases late by the
// dispatcher's clock: nothing to do.

// headerEarly is on a delivery record this dispatcher sent back because
// it was read too early: "<due>/<due_at written>", in Unix nanoseconds.
// It counts only on a record whose due_at is the second value: a record
// built from this one (a hold, a retry) sets a due_at of its own.
const headerEarly = "hookline-early"

// earlyMark returns the due time and the pushed due_at r's headerEarly
// names, if any.
func earlyMark(r *kgo.Record) (due, pushed time.Time, ok bool) {
	v := header(r, headerEarly)
	if v == "" {
		return time.Time{}, time.Time{}, false
	}
	a, b, found := strings.Cut(v, "/")
	dn, err1 := strconv.ParseInt(a, 10, 64)
	pn, err2 := strconv.ParseInt(b, 10, 64)
	if !found || err1 != nil || err2 != nil {
		return time.Time{}, time.Time{}, false
	}
	return time.Unix(0, dn), time.Unix(0, pn), true
}

// restoreDue gives d, decoded from r, back the due time it had before
// this dispatcher pushed it, when r's due_at is the pushed one
// (headerEarly).
func restoreDue(r *kgo.Record, d *hooklinev1.Delivery) {
	due, pushed, ok := earlyMark(r)
	if ok && d.GetDueAt() != nil && d.GetDueAt().AsTime().Equal(pushed) {
		d.DueAt = timestamppb.New(due)
	}
}

// notYetDue sends d, read at now before its due time by more than the
// early hold, back to the retries topic pushed by how early it was, at
// least twice the previous push (the package comment above).
func (h *handler) notYetDue(ctx context.Context, r *kgo.Record, d *hooklinev1.Delivery, now time.Time) []*kgo.Record {
	due := d.GetDueAt().AsTime()
	var push time.Duration
	if orig, pushed, ok := earlyMark(r); ok && orig.Equal(due) {
		push = pushed.Sub(orig)
	}
	push += max(due.Sub(now), push)
	at := due.Add(push)
	h.warnEarly(ctx, d, due.Sub(now), push)
	h.writer.deferred(ctx, d, "read before due")
	later := proto.Clone(d).(*hooklinev1.Delivery)
	later.DueAt = timestamppb.New(at)
	out := h.writer.records(h.topics.Retries, d.GetEndpointId(), later)
	out[0].Headers = append(out[0].Headers, kgo.RecordHeader{Key: headerEarly,
		Value: []byte(strconv.FormatInt(due.UnixNano(), 10) + "/" + strconv.FormatInt(at.UnixNano(), 10))})
	return out
}

// earlyWarnEvery spaces the warnings of deliveries read too early: with
// the clocks apart, every delivery is.
const earlyWarnEvery = time.Minute

// earlyWarned is when a dispatcher last warned of a delivery read too
// early (Unix nanoseconds).
type earlyWarned struct{ at atomic.Int64 }

// warnEarly warns that d was read early by more than the early hold, at
// most once per earlyWarnEvery.
func (h *handler) warnEarly(ctx context.Context, d *hooklinev1.Delivery, early, push time.Duration) {
	now := h.now().UnixNano()
	last := h.earlyWarned.at.Load()
	if now-last < int64(earlyWarnEvery) || !h.earlyWarned.at.CompareAndSwap(last, now) {
		return
	}
	h.log.WarnContext(ctx, "delivery read before its due time by more than --early-hold: the scheduler's clock is ahead of this dispatcher's; check NTP on both hosts",
		"delivery_id", d.GetDeliveryId(), "early", early, "early_hold", h.cfg.EarlyHold, "pushed_by", push)
}

// earlyHolds are the deliveries read a little before their due time,
// waiting in memory until it (the loop's; the package comment above):
// the early hold read from cfg as it is used, and the heap of what
// waits, by due time. The engine holds one and places what wakes.
type earlyHolds struct {
	cfg  *Config
	heap earlyHeap
}

// hold keeps en, read at now before its due time by at most the early
// hold, in memory until it is due, and reports whether it did.
func (h *earlyHolds) hold(en *entry, now time.Time) bool {
	due := en.d.GetDueAt().AsTime()
	if due.Sub(now) > h.cfg.EarlyHold {
		return false
	}
	en.state = entryEarly
	heap.Push(&h.heap, earlyEntry{due: due, en: en})
	return true
}

// wake places, with place, the deliveries held early that are due by
// now; those of a partition dropped meanwhile are gone with it.
func (h *earlyHolds) wake(now time.Time, place func(*entry, time.Time)) {
	for len(h.heap) > 0 && !h.heap[0].due.After(now) {
		en := heap.Pop(&h.heap).(earlyEntry).en
		if en.part.dropped || en.state != entryEarly {
			continue
		}
		place(en, now)
	}
}

// next is when the first delivery held early is due, or zero.
func (h *earlyHolds) next() time.Time {
	if len(h.heap) == 0 {
		return time.Time{}
	}
	return h.heap[0].due
}

// earlyHeap orders the deliveries held early by due time.
type earlyHeap []earlyEntry

type earlyEntry struct {
	due time.Time
	en  *entry
}

func (h earlyHeap) Len() int           { return len(h) }
func (h earlyHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h earlyHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *earlyHeap) Push(x any)        { *h = append(*h, x.(earlyEntry)) }
func (h *earlyHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = earlyEntry{}
	*h = old[:len(old)-1]
	return x
}
