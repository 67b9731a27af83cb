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
