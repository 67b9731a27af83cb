package ingest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/endpoints"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// heldBudget bounds the payload bytes a tenant's paused endpoints hold
// (--max-held-bytes-per-tenant; docs/DESIGN.md, "Held bytes"). A paused
// endpoint's deliveries are kept until it resumes or they end at
// --max-hold, so a tenant that pauses its own endpoint could otherwise
// make Hookline keep whatever it publishes to it.
//
// What a tenant holds is, over its endpoints paused now (the endpoints
// view), the payload bytes of their deliveries that have not ended: as
// the history index has read them (unended), plus what this process
// wrote to them that the index has not read yet, plus what publishes
// checked here are writing. The first two are told apart by offset: a
// write this process made is counted by the index once the index has
// applied the deliveries topic's partition past it, and is forgotten
// here then (unended returns both from one state of the index). So one
// ingest counts exactly its own writes and every other replica's that
// its index has read; writes by other replicas within the index's lag
// are not seen, and replicas together may pass the budget by what they
// accept within that lag.
//
// Only a publish that adds to a paused endpoint is checked; the tenant's
// other publishes never wait on it. Safe for concurrent use.
type heldBudget struct {
	limit   int64
	paused  func(tenant string) []string
	unended func(tenant string, endpoints []string) (bytes map[string]int64, applied map[int32]int64, err error)

	mu       sync.Mutex
	written  map[string][]heldWrite // by endpoint: written here, maybe not read by the index yet
	reserved map[string]int64       // by endpoint: bytes of checked publishes not yet acknowledged
}

// heldWrite is one delivery record this process wrote to a paused
// endpoint.
type heldWrite struct {
	partition int32
	offset    int64
	bytes     int64
}

// heldReservation is what one publish reserved on its paused targets.
// Its methods are safe for concurrent use; a nil one does nothing.
type heldReservation struct {
	b       *heldBudget
	bytes   int64
	pending map[string]bool // paused targets not yet acknowledged
}

// heldScope carries one publish's reservation from the check of its
// targets to its writes (heldIn) and its end.
type heldScope struct{ r *heldReservation }

type heldScopeKey struct{}

// scope returns ctx with a place for one publish's reservation, and the
// function that releases what the reservation holds when the call ends.
func (b *heldBudget) scope(ctx context.Context) (context.Context, func()) {
	sc := &heldScope{}
	return context.WithValue(ctx, heldScopeKey{}, sc), func() { sc.r.done() }
}

// heldIn returns the reservation of ctx's publish, or nil.
func heldIn(ctx context.Context) *heldReservation {
	if sc, ok := ctx.Value(heldScopeKey{}).(*heldScope); ok {
		return sc.r
	}
	return nil
}

// reserve checks that a publish of payload bytes to targets keeps the
// tenant within its held budget and reserves the bytes on its paused
// targets, in ctx's scope (which releases them), or refuses it with
// RESOURCE_EXHAUSTED naming the paused endpoint. It reserves nothing
// when the budget is off, no target is paused, or ctx has no scope.
func (b *heldBudget) reserve(ctx context.Context, tenant string, targets []*hooklinev1.EndpointRecord, payload int) error {
	sc, _ := ctx.Value(heldScopeKey{}).(*heldScope)
	if b == nil || b.limit <= 0 || sc == nil {
		return nil
	}
	// A publish checks its targets once; were it twice, the last counts.
	sc.r.done()
	sc.r = nil
	var hit []string
	for _, t := range targets {
		if t.GetEndpoint().GetStatus() == hooklinev1.EndpointStatus_ENDPOINT_STATUS_PAUSED {
			hit = append(hit, t.GetEndpoint().GetId())
		}
	}
	if len(hit) == 0 {
		return nil
	}
	paused := b.paused(tenant)
	for _, id := range hit {
		if !slices.Contains(paused, id) {
			paused = append(paused, id)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	counted, applied, err := b.unended(tenant, paused)
	if err != nil {
		return status.Errorf(codes.Unavailable, "held deliveries not counted: %v; retry", err)
	}
	b.forget(applied)
	var held int64
	for _, id := range paused {
		held += counted[id] + b.reserved[id]
		for _, w := range b.written[id] {
			held += w.bytes
		}
	}
	add := int64(payload) * int64(len(hit))
	if held+add > b.limit {
		which := "endpoint " + hit[0] + " is"
		if len(hit) > 1 {
			which = "endpoints " + strings.Join(hit, ", ") + " are"
		}
		return status.Error(codes.ResourceExhausted, fmt.Sprintf(
			"%s paused and the tenant's paused endpoints hold %d bytes of undelivered payloads; this publish would add %d, the limit is %d (--max-held-bytes-per-tenant): resume the endpoint (ResumeEndpoint) to deliver what it holds, delete it if it is not coming back, or publish to other endpoints with endpoint_ids; nothing was written",
			which, held, add, b.limit))
	}
	r := &heldReservation{b: b, bytes: int64(payload), pending: make(map[string]bool, len(hit))}
	if b.reserved == nil {
		b.reserved, b.written = map[string]int64{}, map[string][]heldWrite{}
	}
	for _, id := range hit {
		b.reserved[id] += r.bytes
		r.pending[id] = true
	}
	sc.r = r
	return nil
}

// forget drops the writes the index has read: those below its applied
// offset of their partition. Called with b.mu held.
func (b *heldBudget) forget(applied map[int32]int64) {
	for id, ws := range b.written {
		ws = slices.DeleteFunc(ws, func(w heldWrite) bool { return w.offset < applied[w.partition] })
		if len(ws) == 0 {
			delete(b.written, id)
		} else {
			b.written[id] = ws
		}
	}
}

// acked moves the reservation of r's endpoint (its key) to the writes
// the index has yet to read, once Kafka acknowledged r.
func (r *heldReservation) acked(rec *kgo.Record) {
	if r == nil {
		return
	}
	id := string(rec.Key)
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if !r.pending[id] {
		return
	}
	delete(r.pending, id)
	b.unreserve(id, r.bytes)
	b.written[id] = append(b.written[id], heldWrite{partition: rec.Partition, offset: rec.Offset, bytes: r.bytes})
}

// done releases what r reserved and was not acknowledged (a failed or
// unfinished write: if it lands later, the index counts it then).
func (r *heldReservation) done() {
	if r == nil {
		return
	}
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	for id := range r.pending {
		b.unreserve(id, r.bytes)
	}
	clear(r.pending)
}

// unreserve takes n bytes off id's reservations. Called with b.mu held.
func (b *heldBudget) unreserve(id string, n int64) {
	if b.reserved[id] -= n; b.reserved[id] <= 0 {
		delete(b.reserved, id)
	}
}

// pausedEndpoints returns the ids of tenant's paused endpoints in store,
// the endpoints view (heldBudget.paused).
func pausedEndpoints(store *endpoints.Store, tenant string) []string {
	var out []string
	for _, r := range store.List(tenant) {
		if r.GetEndpoint().GetStatus() == hooklinev1.EndpointStatus_ENDPOINT_STATUS_PAUSED {
			out = append(out, r.GetEndpoint().GetId())
		}
	}
	return out
}
