package scheduler

import (
	"testing"
	"time"
)

func entry(key, ep string, off int64, due time.Time) *parkedEntry {
	return &parkedEntry{key: key, endpoint: ep, offset: off, due: due}
}

func keysOf(picks []parkedPick) []string {
	var out []string
	for _, p := range picks {
		k := p.e.key
		if p.overflow {
			k += "!"
		}
		out = append(out, k)
	}
	return out
}

func TestParkedIndexAddsReplacesAndTombstonesInLogOrder(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	x := newParkedIndex()
	if x.add(0, entry("d1", "ep_1", 1, now)) {
		t.Fatal("an entry of an unowned partition was indexed")
	}
	x.assign(0)
	tests := []struct {
		name     string
		do       func()
		wantSize int
		wantOff  int64 // d1's offset, -1 for none
	}{
		{"park", func() { x.add(0, entry("d1", "ep_1", 5, now)) }, 1, 5},
		{"a later park replaces", func() { x.add(0, entry("d1", "ep_1", 9, now)) }, 1, 9},
		{"the same record read again changes nothing", func() { x.add(0, entry("d1", "ep_1", 9, now)) }, 1, 9},
		{"an older tombstone keeps it", func() { x.tombstone(0, "d1", 7) }, 1, 9},
		{"another key", func() { x.add(0, entry("d2", "ep_1", 10, now)) }, 2, 9},
		{"a later tombstone removes it", func() { x.tombstone(0, "d1", 11) }, 1, -1},
		{"parked again after its release", func() { x.add(0, entry("d1", "ep_2", 12, now)) }, 2, 12},
	}
	for _, tt := range tests {
		tt.do()
		if x.size != tt.wantSize {
			t.Fatalf("%s: size %d, want %d", tt.name, x.size, tt.wantSize)
		}
		e := x.parts[0].byKey["d1"]
		if (e == nil) != (tt.wantOff < 0) || (e != nil && e.offset != tt.wantOff) {
			t.Fatalf("%s: d1 is %+v, want offset %d", tt.name, e, tt.wantOff)
		}
	}
	// Per endpoint sets follow the key's latest park.
	if _, ok := x.parts[0].byEndpoint["ep_2"]["d1"]; !ok || len(x.parts[0].byEndpoint["ep_1"]) != 1 {
		t.Fatalf("per-endpoint sets %v, want ep_1: d2, ep_2: d1", x.parts[0].byEndpoint)
	}
	x.drop(0)
	if x.size != 0 || x.parts[0] != nil {
		t.Fatalf("after drop: size %d", x.size)
	}
}

func TestParkedIndexReleasesNothingBeforeItIsCaughtUp(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	x := newParkedIndex()
	x.assign(0)
	x.add(0, entry("d1", "ep_1", 1, now.Add(-time.Hour)))
	resumed := func(string) endpointState { return endpointReleased }
	if got := x.pick(now, resumed, nil, 100, 100); len(got) != 0 {
		t.Fatalf("picked %v before the partition caught up", keysOf(got))
	}
	if !x.pending() {
		t.Fatal("a partition catching up is not pending: the loop would not wake")
	}
	x.parts[0].caughtUp = true
	if got := keysOf(x.pick(now, resumed, nil, 100, 100)); len(got) != 1 || got[0] != "d1" {
		t.Fatalf("picked %v once caught up, want d1", got)
	}
}

func TestParkedIndexPicksResumedEndpointsAndOverHolds(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	x := newParkedIndex()
	x.assign(0)
	x.assign(1)
	x.parts[0].caughtUp, x.parts[1].caughtUp = true, true
	x.add(0, entry("a1", "ep_a", 1, now.Add(time.Hour)))    // paused, held
	x.add(0, entry("a2", "ep_a", 2, now.Add(-time.Second))) // paused, hold over
	x.add(1, entry("b1", "ep_b", 1, now.Add(time.Hour)))    // resumed
	x.add(1, entry("b2", "ep_b", 2, now.Add(time.Hour)))    // resumed
	state := func(ep string) endpointState {
		if ep == "ep_b" {
			return endpointReleased
		}
		return endpointPaused
	}
	tests := []struct {
		name  string
		state func(string) endpointState
		limit int
		want  []string
	}{
		{"resumed and expired", state, 100, []string{"a2", "b1", "b2"}},
		{"bounded per hop", state, 2, []string{"a2", "b1"}},
		{"view not synced: expiries only", nil, 100, []string{"a2"}},
	}
	for _, tt := range tests {
		got := keysOf(x.pick(now, tt.state, nil, tt.limit, 100))
		if !equal(got, tt.want) {
			t.Errorf("%s: picked %v, want %v", tt.name, got, tt.want)
		}
	}
	// Entries in flight are not picked again; released ones leave.
	picks := x.pick(now, state, nil, 100, 100)
	for _, p := range picks {
		p.e.releasing = true
	}
	if got := x.pick(now, state, nil, 100, 100); len(got) != 0 {
		t.Fatalf("picked %v while releasing", keysOf(got))
	}
	for _, p := range picks {
		p.e.releasing = false
		x.released(p.p, p.e)
	}
	if x.size != 1 || x.parts[0].byKey["a1"] == nil {
		t.Fatalf("after the releases: size %d, want only a1 left", x.size)
	}
}

func TestParkedIndexOverItsBoundForwardsTheOverflow(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	x := newParkedIndex()
	x.assign(0)
	x.parts[0].caughtUp = true
	for i, k := range []string{"d1", "d2", "d3", "d4"} {
		x.add(0, entry(k, "ep_1", int64(i), now.Add(time.Hour)))
	}
	paused := func(string) endpointState { return endpointPaused }
	if got := keysOf(x.pick(now, paused, nil, 100, 2)); !equal(got, []string{"d1!", "d2!"}) {
		t.Fatalf("picked %v over a bound of 2, want two overflows", got)
	}
	// An expiry counts towards the bound: one overflow only.
	x.parts[0].byKey["d4"].due = now
	if got := keysOf(x.pick(now, paused, nil, 100, 2)); !equal(got, []string{"d4", "d1!"}) {
		t.Fatalf("picked %v, want the expiry d4 and one overflow", got)
	}
}

func TestSyncKeysHashToTheirPartition(t *testing.T) {
	for _, n := range []int{1, 3, 12} {
		seen := map[string]bool{}
		for p := range int32(n) {
			k := syncKey("hl.parked", p, n)
			if seen[k] {
				t.Fatalf("key %q for two partitions", k)
			}
			seen[k] = true
		}
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestParkedIndexReleasesMembersBehindABlockedHeadWhenTheLaneIsFree:
// a member parked behind its lane's blocked head goes when the lanes
// view says the lane is no longer blocked before it, or its endpoint is
// gone, or its hold is over — not when its endpoint is active (it is,
// all along: a block is not a pause). Before, such a member went round
// the retry path every --park-recheck while the block lasted.
func TestParkedIndexReleasesMembersBehindABlockedHeadWhenTheLaneIsFree(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	x := newParkedIndex()
	x.assign(0)
	x.parts[0].caughtUp = true
	behind := func(key, ep, lane string, seq int64, due time.Time) *parkedEntry {
		e := entry(key, ep, seq, due)
		e.lane = &parkedLane{key: lane, seq: seq}
		return e
	}
	x.add(0, behind("a5", "ep_a", "k", 5, now.Add(time.Hour)))    // behind the head at 3
	x.add(0, behind("a9", "ep_a", "j", 9, now.Add(time.Hour)))    // lane j: not blocked
	x.add(0, behind("a7", "ep_a", "k", 7, now.Add(-time.Second))) // hold over
	x.add(0, behind("g1", "ep_gone", "", 1, now.Add(time.Hour)))  // endpoint deleted
	x.add(0, entry("p1", "ep_a", 10, now.Add(time.Hour)))         // an ordinary park: ep_a is active
	state := func(ep string) endpointState {
		if ep == "ep_gone" {
			return endpointGone
		}
		return endpointReleased
	}
	blockedAt3 := func(ep string, l *parkedLane) bool { return ep == "ep_a" && l.key == "k" && l.seq > 3 }
	tests := []struct {
		name    string
		state   func(string) endpointState
		blocked func(string, *parkedLane) bool
		want    []string
	}{
		{"lane k blocked", state, blockedAt3, []string{"a7", "a9", "p1", "g1"}},
		{"lanes view not synced: expiries and deletions", state, nil, []string{"a7", "p1", "g1"}},
		{"lane k unblocked", state, func(string, *parkedLane) bool { return false }, []string{"a5", "a7", "a9", "p1", "g1"}},
		{"endpoints view not synced: expiries only", nil, blockedAt3, []string{"a7"}},
	}
	for _, tt := range tests {
		if got := keysOf(x.pick(now, tt.state, tt.blocked, 100, 100)); !equal(got, tt.want) {
			t.Errorf("%s: picked %v, want %v", tt.name, got, tt.want)
		}
	}
}
