package dispatcher

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/services/dispatcher/attempt"
)

// journaledAnswers opens dir as a process starting would: the journal,
// and the answers it holds.
func journaledAnswers(t *testing.T, dir string) (*answered, *answerJournal) {
	t.Helper()
	j, read, err := openAnswerJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	a := newAnswered(answeredBytes)
	a.attach(j, read)
	return a, j
}

func journalAnswer(i int) (answerKey, attempt.Result) {
	return answerKey{partition: 2, offset: int64(100 + i), delivery: fmt.Sprint("dlv_", i), attempt: 1},
		attempt.Result{Class: hooklinev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, StatusCode: 204, Started: time.Unix(1700000000, int64(i)), Latency: 3 * time.Millisecond, Excerpt: []byte("ok")}
}

// TestAJournaledAnswerOutlivesItsProcess: an answer put before a crash
// (the journal never closed: kill -9 leaves the file as written) is
// there, whole, for the process that opens the directory next; a line
// the crash tore is skipped.
func TestAJournaledAnswerOutlivesItsProcess(t *testing.T) {
	dir := t.TempDir()
	a, j := journaledAnswers(t, dir)
	for i := range 3 {
		k, ar := journalAnswer(i)
		a.put(k, "https://rx.example/h", ar)
	}
	segs, _ := j.segments()
	f, err := os.OpenFile(j.path(segs[len(segs)-1]), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(`{"p":2,"o":999,"d":"dlv_torn","a":1,"u":"https://rx`) // the crash's torn line
	_ = f.Close()
	j.close() // the flock goes with the process

	b, j2 := journaledAnswers(t, dir)
	defer j2.close()
	if n, _ := b.size(); n != 3 {
		t.Fatalf("%d answers read back, want 3 (the torn line skipped)", n)
	}
	k, want := journalAnswer(1)
	got, ok := b.get(k, "https://rx.example/h")
	if !ok || got.StatusCode != want.StatusCode || got.Class != want.Class || !got.Started.Equal(want.Started) || got.Latency != want.Latency || string(got.Excerpt) != "ok" {
		t.Fatalf("answer read back %+v (found %v), want %+v", got, ok, want)
	}
	if _, ok := b.get(k, "https://other.example/h"); ok {
		t.Fatal("an answer read back settles a record for another URL")
	}
}

// TestAJournalSegmentGoesWhenNoneOfItsAnswersIsHeld: segments roll over
// at their size, and one not written any more is removed once every
// answer it holds has committed (forget) or been replaced — so the
// directory holds about what the memory holds.
func TestAJournalSegmentGoesWhenNoneOfItsAnswersIsHeld(t *testing.T) {
	dir := t.TempDir()
	a, j := journaledAnswers(t, dir)
	defer j.close()
	j.max = 300 // about two lines a segment
	var keys []answerKey
	for i := range 6 {
		k, ar := journalAnswer(i)
		a.put(k, "https://rx.example/h", ar)
		keys = append(keys, k)
	}
	segs, _ := j.segments()
	if len(segs) < 3 {
		t.Fatalf("segments %v after 6 answers of ~150 bytes in segments of 300: want at least 3", segs)
	}
	a.forget(keys[:4]...)
	left, _ := j.segments()
	for _, n := range left {
		data, _ := os.ReadFile(j.path(n))
		if n != j.seg && !strings.Contains(string(data), `"dlv_4"`) && !strings.Contains(string(data), `"dlv_5"`) {
			t.Fatalf("segment %d holds no answer held any more and is still there (segments %v)", n, left)
		}
	}
	a.forget(keys[4:]...)
	if left, _ := j.segments(); len(left) != 1 || left[0] != j.seg {
		t.Fatalf("segments %v once every answer committed, want only the one written (%d)", left, j.seg)
	}
}

// TestAnswersBelowTheCommittedOffsetAreForgottenAtAnAssignment: answers
// a journal kept from before a crash whose settlements did commit (the
// partition's committed offset is past them) are dropped when the
// assignment reads the committed offsets; the others stay.
func TestAnswersBelowTheCommittedOffsetAreForgottenAtAnAssignment(t *testing.T) {
	a := newAnswered(answeredBytes)
	for i := range 4 {
		k, ar := journalAnswer(i) // offsets 100-103 of partition 2
		a.put(k, "u", ar)
	}
	other, ar := journalAnswer(9)
	other.partition = 1
	a.put(other, "u", ar)
	a.forgetCommitted(2, 102)
	for i := range 4 {
		k, _ := journalAnswer(i)
		if _, ok := a.get(k, "u"); ok != (i >= 2) {
			t.Fatalf("answer at offset %d held %v after the committed offset 102", k.offset, ok)
		}
	}
	if _, ok := a.get(other, "u"); !ok {
		t.Fatal("an answer of another partition was dropped")
	}
}

// TestAnAnswersDirServesOneDispatcher: a second process on the same
// directory is refused with an error that says so.
func TestAnAnswersDirServesOneDispatcher(t *testing.T) {
	dir := t.TempDir()
	_, j := journaledAnswers(t, dir)
	defer j.close()
	if _, _, err := openAnswerJournal(dir); err == nil || !strings.Contains(err.Error(), "in use by another dispatcher") {
		t.Fatalf("second open of %s: %v, want it refused as in use", filepath.Base(dir), err)
	}
}

// BenchmarkAnswerPut is what an answer costs the attempt that got it:
// memory only, and with the journal (a JSON line and a write(2)).
func BenchmarkAnswerPut(b *testing.B) {
	for _, journal := range []bool{false, true} {
		b.Run(fmt.Sprint("journal=", journal), func(b *testing.B) {
			a := newAnswered(answeredBytes)
			if journal {
				j, read, err := openAnswerJournal(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				defer j.close()
				a.attach(j, read)
			}
			_, ar := journalAnswer(0)
			ar.Excerpt = []byte(`{"ok":true}`)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				k := answerKey{partition: 1, offset: int64(i), delivery: "dlv_01m96pv9n2t84d3a7v4yw7ffge", attempt: 1}
				a.put(k, "https://receiver.example.com/hooks/orders", ar)
				if i%64 == 63 {
					a.forget(k) // commits keep the memory small
				}
			}
		})
	}
}
