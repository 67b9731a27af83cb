package dispatcher

import (
	"fmt"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/services/dispatcher/attempt"
)

// ak is the answer key of delivery id's first attempt at offset 0.
func ak(id string) answerKey { return answerKey{delivery: id, attempt: 1} }

func okAnswer(excerpt string) attempt.Result {
	return attempt.Result{Class: hooklinev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, StatusCode: 200, Started: time.Unix(1, 0), Excerpt: []byte(excerpt)}
}

func TestAnAnswerIsUsedOnlyForItsURLUntilItsSettlementCommits(t *testing.T) {
	a := newAnswered(1 << 20)
	buf := []byte("ok")
	ar := okAnswer("")
	ar.Excerpt = buf
	a.put(ak("k"), "https://a.example/h", ar)
	buf[0] = 'X' // the attempt's buffer is reused: the answer keeps its own copy
	if _, ok := a.get(ak("k"), "https://b.example/h"); ok {
		t.Fatal("an answer from one URL was used for another")
	}
	got, ok := a.get(ak("k"), "https://a.example/h")
	if !ok || string(got.Excerpt) != "ok" || got.StatusCode != 200 {
		t.Fatalf("get = %+v, %v; want the 200 with excerpt ok", got, ok)
	}
	if _, ok := a.get(ak("k"), "https://a.example/h"); !ok {
		t.Fatal("an answer was gone after one use: an aborted commit would need it again")
	}
	a.forget(ak("k"))
	if _, ok := a.get(ak("k"), "https://a.example/h"); ok || held(a) != 0 || a.bytes != 0 {
		t.Fatalf("after forget: held %d answers, %d bytes", held(a), a.bytes)
	}
}

func TestTheAnswersHeldStayWithinTheirBytesOldestLeavingFirst(t *testing.T) {
	per := int64(len("key-000")+len("u")+10) + answerOverhead
	a := newAnswered(100 * per)
	for i := range 1000 {
		a.put(ak(fmt.Sprintf("key-%03d", i)), "u", okAnswer("0123456789"))
		if a.bytes > a.max {
			t.Fatalf("after %d answers: %d bytes held, bound %d", i+1, a.bytes, a.max)
		}
	}
	if held(a) != 100 {
		t.Fatalf("held %d answers; want the newest 100", held(a))
	}
	if _, ok := a.get(ak("key-899"), "u"); ok {
		t.Fatal("an old answer outlived newer ones")
	}
	if _, ok := a.get(ak("key-999"), "u"); !ok {
		t.Fatal("the newest answer was dropped")
	}
	a.put(ak("huge"), "u", okAnswer(string(make([]byte, 200*per))))
	if _, ok := a.get(ak("huge"), "u"); ok || held(a) != 100 {
		t.Fatal("an answer larger than the bound was held, or pushed the others out")
	}
}

// One answer that never commits (its partition went to another
// dispatcher) must not let the queue grow with every answer committed
// after it.
func TestTheAnswerQueueStaysBoundedBehindOneAnswerNeverForgotten(t *testing.T) {
	a := newAnswered(1 << 30)
	a.put(ak("stuck"), "u", okAnswer(""))
	for i := range 100_000 {
		k := ak(fmt.Sprint("k", i))
		a.put(k, "u", okAnswer(""))
		a.forget(k)
	}
	if held(a) != 1 {
		t.Fatalf("held %d answers; want 1", held(a))
	}
	if n := len(a.queue) - a.head; n > 2*held(a)+1024 {
		t.Fatalf("the queue holds %d slots for 1 answer", n)
	}
	if _, ok := a.get(ak("stuck"), "u"); !ok {
		t.Fatal("the stuck answer was lost by compaction")
	}
}

// held is how many answers a holds.
func held(a *answered) int {
	n, _ := a.size()
	return n
}
