package dispatcher

import (
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestNoAttemptStartsUntilTheWorkAnAbortedCommitKeptHasCommitted (issue
// 24 item 13): after a commit Kafka aborted, the work it kept commits
// before any new attempt starts, so however many rounds commits fail,
// what a crash would re-POST stays what was in flight plus one commit
// interval of completions.
func TestNoAttemptStartsUntilTheWorkAnAbortedCommitKeptHasCommitted(t *testing.T) {
	f := newBlockFixture(t)
	e := f.e
	pop := func() {
		var outs []*kgo.Record
		for _, pw := range e.w.parts {
			outs, _, _ = e.w.popDone(pw, e.s.now(), outs)
		}
		e.c.lanes.outputs(outs)
	}
	f.publish(t, "b", 0, 0)
	e.runDry(t)
	for round := range 3 { // the kept work's commit aborts three times
		pop()
		if err := e.endCommit(t, msg{kind: msgCommitted}); err != nil {
			t.Fatal(err)
		}
		if !e.c.backingOff || e.c.attemptsMayStart(e.s.now()) {
			t.Fatal("attempts may start while the aborted commit backs off")
		}
		_ = e.endCommit(t, msg{kind: msgCommitted, produceErr: errBackoffEnded})
		f.publish(t, "c", round, int64(1+round))
		e.runDry(t)
		if got := f.rx.received(); slices.ContainsFunc(got, func(b string) bool { return strings.HasPrefix(b, `"c`) }) {
			t.Fatalf("round %d: receiver got %v before the kept work committed; want only b0", round, got)
		}
	}
	pop()
	if err := e.endCommit(t, msg{kind: msgCommitted, committed: true}); err != nil {
		t.Fatal(err)
	}
	e.runDry(t)
	if got := f.rx.received(); len(got) != 4 {
		t.Fatalf("receiver got %v once the kept work committed; want b0, c0, c1, c2", got)
	}
}
