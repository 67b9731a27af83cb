package main

import (
	"strings"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
)

// TestReconcileCatchesEveryBrokenPromise feeds the ledger one delivery
// per way Hookline could break its word and checks each is counted: a
// ledger that cannot fail proves nothing.
func TestReconcileCatchesEveryBrokenPromise(t *testing.T) {
	const (
		delivered = hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED
		failed    = hooklinev1.DeliveryState_DELIVERY_STATE_FAILED
	)
	now := time.Now()
	acc := []accepted{
		{deliveryID: "d_ok", eventID: "e_ok", seq: 1},
		{deliveryID: "d_lost", eventID: "e_lost", seq: 2},
		{deliveryID: "d_twice", eventID: "e_twice", seq: 3},
		{deliveryID: "d_unseen", eventID: "e_unseen", seq: 4},
		{deliveryID: "d_dead", eventID: "e_dead", seq: 5},
		{deliveryID: "d_dup", eventID: "e_dup", seq: 6},
		{deliveryID: "d_body", eventID: "e_body", seq: 7},
	}
	res := &results{ends: map[string][]hooklinev1.DeliveryState{
		"d_ok": {delivered}, "d_twice": {delivered, failed}, "d_unseen": {delivered},
		"d_dead": {failed}, "d_dup": {delivered}, "d_body": {delivered},
	}}
	rx := &receivers{seen: map[string]*seen{
		"e_ok":       {requests: 1, ok: 1, first: now, seq: 1},
		"e_twice":    {requests: 1, ok: 1, first: now, seq: 3},
		"e_dead":     {requests: 3, seq: 5},
		"e_dup":      {requests: 3, ok: 3, first: now, seq: 6},
		"e_body":     {requests: 1, ok: 1, first: now, seq: 70},
		"e_phantom":  {requests: 1, ok: 1, first: now, seq: 99},
		"e_unconfrm": {requests: 1, ok: 1, first: now, seq: 100},
	}}
	seqs := map[string]int64{}
	for _, a := range acc {
		seqs[a.eventID] = a.seq
	}
	var rw row
	reconcile(&rw, acc, map[int64]bool{100: true}, res, rx, seqs)
	tests := []struct {
		name      string
		got, want int
	}{
		{"accepted", rw.Accepted, 7},
		{"lost (no outcome, or DELIVERED never received)", rw.Lost, 2},
		{"delivered", rw.Delivered, 5},
		{"dead-lettered", rw.Dead, 1},
		{"more than one terminal outcome", rw.MultiTerminal, 1},
		{"duplicates", rw.Duplicates, 2},
		{"webhook-id with another body", rw.BodyChanged, 1},
		{"received, never published", rw.Phantom, 1},
		{"unconfirmed publish delivered", rw.UnconfirmedDelivered, 1},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %d, want %d", tt.name, tt.got, tt.want)
		}
	}
	if rw.ok() {
		t.Error("a ledger with lost deliveries passed")
	}
}

// TestOrderViolationsCatchesALaneOutOfOrder feeds the order check lanes
// that kept their order (with a repeat after a kill and a dead-lettered
// member) and one whose third member first succeeded before the second
// member's first success was answered: only that one is counted.
func TestOrderViolationsCatchesALaneOutOfOrder(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	acc := []accepted{
		// Lane A in order; member 1 repeated after member 2 (a kill).
		{eventID: "a0", lane: "A", laneSeq: 0},
		{eventID: "a1", lane: "A", laneSeq: 1},
		{eventID: "a2", lane: "A", laneSeq: 2},
		// Lane B: member 1 dead-lettered (never 2xx), 0 and 2 in order.
		{eventID: "b0", lane: "B", laneSeq: 0},
		{eventID: "b1", lane: "B", laneSeq: 1},
		{eventID: "b2", lane: "B", laneSeq: 2},
		// Lane C: member 2 arrived before member 1's answer was written.
		{eventID: "c2", lane: "C", laneSeq: 2},
		{eventID: "c0", lane: "C", laneSeq: 0},
		{eventID: "c1", lane: "C", laneSeq: 1},
		// Unordered traffic is not checked.
		{eventID: "u0", seq: 1},
		{eventID: "u1", seq: 2},
	}
	got := map[string]seen{
		"a0": {ok: 1, firstStart: at(0), first: at(1)},
		"a1": {ok: 2, firstStart: at(2), first: at(3)},
		"a2": {ok: 1, firstStart: at(4), first: at(5)},
		"b0": {ok: 1, firstStart: at(0), first: at(1)},
		"b1": {requests: 12},
		"b2": {ok: 1, firstStart: at(9), first: at(10)},
		"c0": {ok: 1, firstStart: at(0), first: at(1)},
		"c1": {ok: 1, firstStart: at(2), first: at(6)},
		"c2": {ok: 1, firstStart: at(5), first: at(7)},
		"u0": {ok: 1, firstStart: at(9), first: at(10)},
		"u1": {ok: 1, firstStart: at(0), first: at(1)},
	}
	c := orderViolations(acc, got)
	if c.lanes != 3 || c.members != 9 || c.repeated != 1 || c.violations != 1 {
		t.Fatalf("lanes %d members %d repeated %d violations %d, want 3, 9, 1, 1 (%v)", c.lanes, c.members, c.repeated, c.violations, c.examples)
	}
	if len(c.examples) != 1 || !strings.Contains(c.examples[0], "lane C: member 2") {
		t.Errorf("examples %q, want one naming lane C member 2", c.examples)
	}
	rw := row{Accepted: 1, OrderViolations: c.violations}
	if rw.ok() {
		t.Error("a row with an order violation passed")
	}
}
