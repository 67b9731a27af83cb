package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// failEndTxn answers the first n EndTxn requests of c with code.
func failEndTxn(c *kfake.Cluster, n int, code int16) (answered func() int) {
	var mu sync.Mutex
	failed := 0
	c.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		if failed == n {
			return nil, nil, false
		}
		failed++
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = code
		return resp, nil, true
	})
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return failed
	}
}

// copySessions copies topic "in" to "out" in transactions, one session
// after another under Resume (as the services run theirs), until want
// records are committed, and returns what "out" holds then.
func copySessions(t *testing.T, c *kfake.Cluster, want int) ([]string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	seeds := kgo.SeedBrokers(c.ListenAddrs()...)
	err := Resume(ctx, slog.Default(), "test", func(ctx context.Context) error {
		fc, err := kgo.NewClient(seeds)
		if err != nil {
			return err
		}
		err = Fence(ctx, fc, "copier-0", time.Minute)
		fc.Close()
		if err != nil {
			return err
		}
		sess, err := kgo.NewGroupTransactSession(seeds, kgo.TransactionalID("copier-0"), kgo.TransactionTimeout(time.Minute),
			kgo.ConsumerGroup("copier"), kgo.ConsumeTopics("in"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		if err != nil {
			return err
		}
		defer sess.Close()
		for {
			// Done when the group's committed offset (as this session
			// read it from the broker, or committed it) is past the input.
			if sess.Client().CommittedOffsets()["in"][0].Offset >= int64(want) {
				return nil
			}
			pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
			fs := sess.PollFetches(pctx)
			pcancel()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			var out []*kgo.Record
			fs.EachRecord(func(r *kgo.Record) { out = append(out, &kgo.Record{Topic: "out", Value: r.Value}) })
			if len(out) == 0 {
				continue
			}
			_, perr, err := TransactEach(ctx, sess, time.Minute, out, nil, nil)
			if err != nil {
				return err
			}
			if perr != nil {
				return perr
			}
		}
	})
	// A marker after everything committed: once it is read, so is all
	// that came before it.
	seed, serr := kgo.NewClient(seeds)
	if serr != nil {
		t.Fatal(serr)
	}
	defer seed.Close()
	// The instance that fenced a fenced session ends what it left open.
	if err := Fence(ctx, seed, "copier-0", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := seed.ProduceSync(ctx, &kgo.Record{Topic: "out", Value: []byte("marker")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	reader, rerr := kgo.NewClient(seeds, kgo.ConsumeTopics("out"), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if rerr != nil {
		t.Fatal(rerr)
	}
	defer reader.Close()
	var got []string
	for {
		fs := reader.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("marker not read; read %v", got)
		}
		marked := false
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == "marker" {
				marked = true
			} else if !marked {
				got = append(got, string(r.Value))
			}
		})
		if marked {
			return got, err
		}
	}
}

func produceIn(t *testing.T, c *kfake.Cluster, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range n {
		if err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: "in", Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAnEndTxnThatTimesOutIsResolvedByANewSession: EndTxn answered
// REQUEST_TIMED_OUT (its outcome unknown to the client) a few times in a
// row: TransactEach reports ErrUnconfirmed, Resume runs a new session,
// which fences the transactional id and reads its offsets from the
// broker; every input record is copied exactly once.
func TestAnEndTxnThatTimesOutIsResolvedByANewSession(t *testing.T) {
	c := inOutCluster(t)
	produceIn(t, c, 3)
	answered := failEndTxn(c, 3, kerr.RequestTimedOut.Code)
	got, err := copySessions(t, c, 3)
	if err != nil {
		t.Fatalf("sessions ended with %v", err)
	}
	if answered() != 3 {
		t.Fatalf("%d EndTxn failed, want 3", answered())
	}
	if fmt.Sprint(got) != "[r0 r1 r2]" {
		t.Fatalf("out holds %v, want each record once", got)
	}
}

// TestAFencedEndTxnEndsTheSessions: PRODUCER_FENCED (another live
// instance took the transactional id) is no failure a new session
// cures: Resume returns it, saying so, and nothing is committed.
func TestAFencedEndTxnEndsTheSessions(t *testing.T) {
	c := inOutCluster(t)
	produceIn(t, c, 1)
	failEndTxn(c, 1, kerr.ProducerFenced.Code)
	got, err := copySessions(t, c, 1)
	if !errors.Is(err, kerr.ProducerFenced) || errors.Is(err, ErrUnconfirmed) {
		t.Fatalf("sessions ended with %v, want PRODUCER_FENCED and no new session", err)
	}
	if len(got) != 0 {
		t.Fatalf("out holds %v, want nothing", got)
	}
}

// TestAnEndTxnThatCommittedButWasNotConfirmedIsNotCopiedTwice: the
// coordinator commits a transaction, but the answer is lost (the
// connection drops) and the retries of EndTxn time out: the outcome is
// unknown to the client, the commit did happen. The new session must
// resume after it — the offsets it reads from the broker are the
// committed ones — and copy nothing twice.
func TestAnEndTxnThatCommittedButWasNotConfirmedIsNotCopiedTwice(t *testing.T) {
	c := inOutCluster(t)
	produceIn(t, c, 3)
	side, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer side.Close()
	const (
		lie      = iota // the first commit: applied on a side connection, its answer dropped
		applying        // the side connection's copy: processed
		timeouts        // kgo's retries of it: REQUEST_TIMED_OUT
		normal
	)
	var mu sync.Mutex
	phase, timedOut := lie, 0
	c.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		p := phase
		switch {
		case p == lie && req.(*kmsg.EndTxnRequest).Commit:
			phase = applying
			mu.Unlock()
			copyReq := *req.(*kmsg.EndTxnRequest)
			var applied error
			c.SleepControl(func() {
				resp, err := copyReq.RequestWith(context.Background(), side)
				if err == nil {
					err = kerr.ErrorForCode(resp.ErrorCode)
				}
				applied = err
			})
			mu.Lock()
			phase = timeouts
			mu.Unlock()
			if applied != nil {
				t.Errorf("applying the commit on the side: %v", applied)
			}
			return nil, errors.New("connection dropped with the answer"), true
		case p == timeouts && timedOut < 3:
			timedOut++
			mu.Unlock()
			resp := req.ResponseKind().(*kmsg.EndTxnResponse)
			resp.ErrorCode = kerr.RequestTimedOut.Code
			return resp, nil, true
		case p == timeouts:
			phase = normal
		}
		mu.Unlock()
		return nil, nil, false
	})
	got, err := copySessions(t, c, 3)
	if err != nil {
		t.Fatalf("sessions ended with %v", err)
	}
	mu.Lock()
	if timedOut == 0 {
		t.Errorf("the commit's end never failed (phase %d)", phase)
	}
	mu.Unlock()
	if fmt.Sprint(got) != "[r0 r1 r2]" {
		t.Fatalf("out holds %v, want each record once", got)
	}
}

// TestABrokerOutOfReachAtEndTxnIsUnconfirmedNotFatal: a dispatcher whose
// transaction coordinator was killed (make chaos on three brokers, two
// still up) exited with "end transaction: broker closed the connection
// immediately during api versions negotiation …", and one whose only
// broker was down with "connection refused": kgo does not retry either.
// Both leave the outcome unknown and a new session cures them.
func TestABrokerOutOfReachAtEndTxnIsUnconfirmedNotFatal(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"closed at the first read", fmt.Errorf("wrapped: %w", &kgo.ErrFirstReadEOF{}), true},
		{"dial refused", refused, true},
		{"coordinator not available", kerr.CoordinatorNotAvailable, true},
		{"fenced", kerr.ProducerFenced, false},
		{"not authorized", kerr.TransactionalIDAuthorizationFailed, false},
		{"nil", nil, false},
	} {
		if got := Unconfirmed(c.err); got != c.want {
			t.Errorf("%s: Unconfirmed(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// TestAnEndThatOutlivesItsTransactionTimeoutIsUnconfirmed: an End the
// broker does not answer is given up at the transaction's timeout, as
// an End whose outcome is unknown (a new session fences it), instead of
// holding its session for as long as the broker stays silent (make sim
// seed 43: 70 s, a JoinGroup never answered).
func TestAnEndThatOutlivesItsTransactionTimeoutIsUnconfirmed(t *testing.T) {
	c := inOutCluster(t)
	produceIn(t, c, 1)
	seeds := kgo.SeedBrokers(c.ListenAddrs()...)
	sess, err := kgo.NewGroupTransactSession(seeds, kgo.TransactionalID("silent-0"), kgo.TransactionTimeout(time.Minute),
		kgo.ConsumerGroup("silent"), kgo.ConsumeTopics("in"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) == 0 && ctx.Err() == nil {
		sess.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, &kgo.Record{Topic: "out", Value: r.Value}) })
	}
	// Every EndTxn is held until the test ends: the broker stays silent.
	release := make(chan struct{})
	defer close(release)
	c.ControlKey(int16(kmsg.EndTxn), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		c.SleepControl(func() { <-release })
		return nil, nil, false
	})
	began := time.Now()
	_, _, err = TransactEach(ctx, sess, 500*time.Millisecond, out, nil, nil)
	took := time.Since(began)
	if !errors.Is(err, ErrUnconfirmed) {
		t.Fatalf("TransactEach = %v, want an unconfirmed end", err)
	}
	if took > 5*time.Second {
		t.Fatalf("the end was given up after %v, want about its 500ms bound", took)
	}
}

// TestRecordsOfAnAbortedTransactionCanBeProducedAgain: a commit that
// aborts produces the same records in its next transaction; kgo keeps a
// record's first context, so one that ended with the first transaction
// failed every later produce of the record with "context canceled" (seen
// in make sim seeds 37 and 43 with TransactEach's first bound).
func TestRecordsOfAnAbortedTransactionCanBeProducedAgain(t *testing.T) {
	c := inOutCluster(t)
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("again-0"),
		kgo.TransactionTimeout(time.Minute), kgo.ConsumerGroup("again"), kgo.ConsumeTopics("in"))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	recs := []*kgo.Record{{Topic: "out", Value: []byte("a")}, {Topic: "out", Value: []byte("b")}}
	for i := range 2 {
		committed, perr, err := TransactEach(t.Context(), sess, 10*time.Second, recs, nil, nil)
		if err != nil || perr != nil || !committed {
			t.Fatalf("transaction %d: committed %v, produce error %v, error %v", i+1, committed, perr, err)
		}
	}
}

// inOutCluster is a one-broker kfake cluster with topics "in" and "out",
// closed when the test ends.
func inOutCluster(t *testing.T) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}
