package ids

import (
	"slices"
	"testing"
	"time"
)

func TestNewIsUniqueSortableAndValid(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	var got []string
	seen := map[string]bool{}
	for i := range 1000 {
		id := New(Event, base.Add(time.Duration(i)*time.Millisecond))
		if !Valid(Event, id) {
			t.Fatalf("%q is not valid", id)
		}
		if seen[id] {
			t.Fatalf("duplicate %q", id)
		}
		seen[id] = true
		got = append(got, id)
	}
	if !slices.IsSorted(got) {
		t.Fatal("ids made at increasing times do not sort in order")
	}
}

func TestValidRejects(t *testing.T) {
	for _, s := range []string{"", "evt_", "ep_01hzzzzzzzzzzzzzzzzzzzzzzz", "evt_01HZZZZZZZZZZZZZZZZZZZZZZZ", "evt_01hzzzzzzzzzzzzzzzzzzzzzz"} {
		if Valid(Event, s) {
			t.Errorf("Valid(%q) = true", s)
		}
	}
}

func TestFloorAndTimeBoundIdsByTime(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123)
	id := New(Delivery, at)
	got, ok := Time(Delivery, id)
	if !ok || !got.Equal(at) {
		t.Fatalf("Time(%q) = %v, %v; want %v", id, got, ok, at)
	}
	if lo := Floor(Delivery, at); lo > id {
		t.Fatalf("Floor at the id's time %q sorts above the id %q", lo, id)
	}
	if hi := Floor(Delivery, at.Add(time.Millisecond)); hi <= id {
		t.Fatalf("Floor a millisecond later %q sorts at or below the id %q", hi, id)
	}
	if _, ok := Time(Delivery, "dlv_nope"); ok {
		t.Fatal("Time accepted an invalid id")
	}
}

func TestDeriveIsStableTimeOrderedAndDistinct(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	a := Derive(Delivery, at, "evt_1", "ep_1")
	if a != Derive(Delivery, at, "evt_1", "ep_1") {
		t.Fatal("the same parts derived two ids")
	}
	for _, other := range []string{Derive(Delivery, at, "evt_1", "ep_2"), Derive(Delivery, at, "evt_1e", "p_1"), Derive(Delivery, at, "evt_2", "ep_1")} {
		if other == a {
			t.Fatalf("distinct parts derived the same id %s", a)
		}
	}
	if !Valid(Delivery, a) {
		t.Fatalf("%s is not a delivery id", a)
	}
	if got, _ := Time(Delivery, a); !got.Equal(at) {
		t.Fatalf("derived id's time %v, want %v", got, at)
	}
	if a < Floor(Delivery, at) || a >= Floor(Delivery, at.Add(time.Millisecond)) {
		t.Fatalf("%s does not sort at its time", a)
	}
}
