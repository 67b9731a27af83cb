package supervise

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
)

// recorder notes, in order, when each part starts and stops.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) note(s string) {
	r.mu.Lock()
	r.events = append(r.events, s)
	r.mu.Unlock()
}

// until is a part that runs until its context ends, then returns err.
func (r *recorder) until(name string, started chan<- struct{}, err error) Part {
	return Part{Name: name, Run: func(ctx context.Context) error {
		r.note("start " + name)
		started <- struct{}{}
		<-ctx.Done()
		r.note("stop " + name)
		return err
	}}
}

func TestPartsStopInTheReverseOfTheirOrderWhenTheContextEnds(t *testing.T) {
	var r recorder
	started := make(chan struct{}, 3)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, r.until("metrics", started, nil), r.until("kafka", started, nil), r.until("server", started, nil))
	}()
	for range 3 {
		<-started
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	stops := slices.DeleteFunc(slices.Clone(r.events), func(e string) bool { return strings.HasPrefix(e, "start") })
	if want := []string{"stop server", "stop kafka", "stop metrics"}; !slices.Equal(stops, want) {
		t.Fatalf("stops %v, want %v", stops, want)
	}
}

func TestAPartThatFailsStopsTheOthersInOrderAndIsNamedFirst(t *testing.T) {
	var r recorder
	started := make(chan struct{}, 3)
	boom := errors.New("listener closed")
	fail := make(chan struct{})
	failing := Part{Name: "kafka", Run: func(ctx context.Context) error {
		started <- struct{}{}
		<-fail
		r.note("failed kafka")
		return boom
	}}
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), r.until("metrics", started, nil), failing, r.until("server", started, errors.New("drain cut short")))
	}()
	for range 3 {
		<-started
	}
	close(fail)
	err := <-done
	if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "kafka: listener closed") {
		t.Fatalf("Run = %q, want the failing part first", err)
	}
	if !strings.Contains(err.Error(), "server: drain cut short") {
		t.Fatalf("Run = %q, want the server's shutdown error too", err)
	}
	if want := []string{"start metrics", "start server", "failed kafka", "stop server", "stop metrics"}; !slices.Equal(sortStarts(r.events), want) {
		t.Fatalf("events %v, want %v", r.events, want)
	}
}

func TestAPartThatReturnsNilByItselfStopsTheProcess(t *testing.T) {
	var r recorder
	started := make(chan struct{}, 1)
	quits := Part{Name: "server", Run: func(context.Context) error { return nil }}
	err := Run(context.Background(), r.until("metrics", started, nil), quits)
	if err == nil || err.Error() != "server stopped by itself" {
		t.Fatalf("Run = %v, want the server named as stopped by itself", err)
	}
	if want := []string{"start metrics", "stop metrics"}; !slices.Equal(r.events, want) {
		t.Fatalf("events %v, want %v", r.events, want)
	}
}

func TestAPartSeesTheValuesOfRunsContext(t *testing.T) {
	type key struct{}
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	cancel()
	var got any
	if err := Run(ctx, Part{Name: "p", Run: func(ctx context.Context) error {
		got = ctx.Value(key{})
		<-ctx.Done()
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	if got != "v" {
		t.Fatalf("value %v, want v", got)
	}
}

// sortStarts puts the start events first, in name order: parts start
// concurrently, so only the stops have an order to check.
func sortStarts(events []string) []string {
	var starts, rest []string
	for _, e := range events {
		if strings.HasPrefix(e, "start") {
			starts = append(starts, e)
		} else {
			rest = append(rest, e)
		}
	}
	slices.Sort(starts)
	return append(starts, rest...)
}

func TestAnErrorThatNamesItsPartIsNotNamedTwice(t *testing.T) {
	err := Run(context.Background(), Part{Name: "ingest", Run: func(context.Context) error { return errors.New("ingest: listen: address in use") }})
	if err == nil || err.Error() != "ingest: listen: address in use" {
		t.Fatalf("Run = %v, want the part's own error as it is", err)
	}
}

func TestAGroupStartsPartsBetweenStepsAndStopsOnAFailureSeenOutsideThem(t *testing.T) {
	var r recorder
	started := make(chan struct{}, 2)
	g := New(context.Background())
	g.Go(r.until("views", started, nil))
	<-started
	if g.Context().Err() != nil {
		t.Fatal("the group stopped before anything failed")
	}
	g.Go(r.until("loop", started, nil))
	<-started
	g.Stop(errors.New("endpoints: view failed"))
	<-g.Context().Done()
	err := g.Wait()
	if err == nil || err.Error() != "endpoints: view failed" {
		t.Fatalf("Wait = %v, want the watcher's error", err)
	}
	if want := []string{"start views", "start loop", "stop loop", "stop views"}; !slices.Equal(r.events, want) {
		t.Fatalf("events %v, want %v", r.events, want)
	}
}
