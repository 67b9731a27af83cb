package main

import (
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
