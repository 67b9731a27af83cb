// Command schedbench measures the scheduler on a real Kafka: its memory
// while up to a million retry timers are pending, and how late it
// releases timers that come due (R-SCHED-1, R-SCHED-2). It runs the
// scheduler binary as a child process, so the numbers are that process's
// alone. Everything it touches is on loopback, and it stops by itself.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/config"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

type flags struct {
	Brokers   []string      `flag:"brokers" default:"127.0.0.1:19092" usage:"Kafka to run against (loopback)"`
	Scheduler string        `flag:"scheduler-bin" default:"bin/scheduler" usage:"scheduler binary"`
	Timers    int           `flag:"timers" default:"1000000" usage:"pending timers to park"`
	Probes    int           `flag:"probes" default:"2000" usage:"timers that come due during the run, for lateness"`
	ProbeFor  time.Duration `flag:"probe-window" default:"60s" usage:"probes come due spread over this window"`
	Deadline  time.Duration `flag:"deadline" default:"15m" usage:"the whole run stops after this long"`
	Settle    time.Duration `flag:"settle" default:"20s" usage:"idle time before each RSS reading, so memory freed after a burst is returned"`
}

func main() {
	var f flags
	if err := config.Load(flag.NewFlagSet("schedbench", flag.ContinueOnError), &f, os.Args[1:], func(string) string { return "" }); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.Deadline)
	defer cancel()
	if err := run(ctx, f); err != nil {
		fmt.Fprintln(os.Stderr, "schedbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, f flags) error {
	kc, err := config.Defaults[hkafka.Config]()
	if err != nil {
		return err
	}
	kc.Brokers = f.Brokers
	kc.TopicPrefix = fmt.Sprintf("bench%d.", time.Now().Unix())
	kc.Partitions = 6
	topics := kc.Topics()
	opts, err := kc.Opts()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(opts, kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(200_000))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if err := kc.EnsureTopics(ctx, adm, kc.Specs()); err != nil {
		return err
	}

	group := kc.TopicPrefix + "scheduler"
	cmd := exec.CommandContext(ctx, f.Scheduler,
		"--kafka-brokers", strings.Join(f.Brokers, ","), "--topic-prefix", kc.TopicPrefix,
		"--topic-partitions", "6", "--group", group, "--transactional-id", group)
	// gctrace lets the report tell live heap from memory the runtime has
	// not yet returned to the OS.
	cmd.Env = append(os.Environ(), "GODEBUG=gctrace=1")
	logPath := os.TempDir() + "/schedbench-scheduler.log"
	cmd.Stderr, err = os.Create(logPath)
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s (run make build first): %w", f.Scheduler, err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	rss := newSampler(cmd.Process.Pid)
	go rss.run(ctx)
	fmt.Printf("scheduler pid %d, topics %s*, log %s\n", cmd.Process.Pid, kc.TopicPrefix, os.TempDir()+"/schedbench-scheduler.log")

	// Stage 0: idle. Stage 1: 10% of the timers. Stage 2: all of them.
	if err := waitCaughtUp(ctx, adm, group, topics.Retries); err != nil {
		return err
	}
	idle := rss.current()
	r := rand.New(rand.NewPCG(1, 2))
	far := func() time.Time { return time.Now().Add(2*time.Hour + time.Duration(r.Int64N(int64(time.Hour)))) }
	first := f.Timers / 10
	start := time.Now()
	if err := produce(ctx, cl, topics.Retries, 0, first, far); err != nil {
		return err
	}
	if err := waitCaughtUp(ctx, adm, group, topics.Retries); err != nil {
		return err
	}
	atTenth := rss.settled(ctx, f.Settle)
	if err := produce(ctx, cl, topics.Retries, first, f.Timers-first, far); err != nil {
		return err
	}
	if err := waitCaughtUp(ctx, adm, group, topics.Retries); err != nil {
		return err
	}
	parked := time.Since(start) - f.Settle
	atAll := rss.settled(ctx, f.Settle)

	// Probes: timers due over the next window while the million wait.
	late, early, err := probe(ctx, kc, cl, f.Probes, f.ProbeFor)
	if err != nil {
		return err
	}
	slices.Sort(late)
	pct := func(p float64) time.Duration {
		if len(late) == 0 {
			return 0
		}
		return late[min(len(late)-1, int(p*float64(len(late))))]
	}
	fmt.Printf(`
scheduler benchmark (Apache Kafka on loopback, 6 partitions, tiers 1s..1h)
  pending timers parked           %d in %v (%.0f timers/s through retries -> tiers)
  scheduler RSS idle              %6.1f MiB
  scheduler RSS, %7d pending    %6.1f MiB   (after %v idle)
  scheduler RSS, %7d pending    %6.1f MiB   (after %v idle)
  scheduler peak RSS (VmHWM)      %6.1f MiB
  scheduler live heap, last GC    %s
  release lateness (%d probes due over %v, observed by a read_committed consumer)
    p50 %v   p90 %v   p99 %v   max %v   early %d
`, f.Timers, parked.Round(time.Millisecond), float64(f.Timers)/parked.Seconds(),
		mib(idle), first, mib(atTenth), f.Settle, f.Timers, mib(atAll), f.Settle, mib(rss.peak()), lastLiveHeap(logPath),
		len(late), f.ProbeFor, pct(0.5).Round(time.Millisecond), pct(0.9).Round(time.Millisecond), pct(0.99).Round(time.Millisecond), pct(1).Round(time.Millisecond), early)
	if early > 0 {
		return fmt.Errorf("%d timers fired early", early)
	}
	return nil
}

func mib(kb int64) float64 { return float64(kb) / 1024 }

func delivery(i int, due time.Time) *kgo.Record {
	d := &hooklinev1.Delivery{
		DeliveryId: fmt.Sprintf("dlv_bench_%d", i), EventId: fmt.Sprintf("evt_bench_%d", i), TenantId: "bench",
		EndpointId: fmt.Sprintf("ep_bench_%d", i%1000), EventType: "bench.timer",
		Payload: []byte(`{"invoice":"in_1","amount":4200,"currency":"eur"}`), Attempt: 2,
		DueAt: timestamppb.New(due), Kind: hooklinev1.DeliveryKind_DELIVERY_KIND_RETRY,
	}
	v, _ := proto.Marshal(d)
	return &kgo.Record{Key: []byte(d.GetEndpointId()), Value: v}
}

func produce(ctx context.Context, cl *kgo.Client, topic string, from, n int, due func() time.Time) error {
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	for i := from; i < from+n; i++ {
		r := delivery(i, due())
		r.Topic = topic
		wg.Add(1)
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Store(&err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	if e := failed.Load(); e != nil {
		return *e
	}
	return nil
}

// waitCaughtUp waits until the scheduler's group has committed every
// record of topic: all timers have moved on into the tiers.
func waitCaughtUp(ctx context.Context, adm *kadm.Client, group, topic string) error {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		lags, err := adm.Lag(ctx, group)
		if err == nil {
			l := lags[group]
			if l.Error() == nil && l.Lag.TotalByTopic()[topic].Lag == 0 && len(l.Lag[topic]) > 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the scheduler to consume %s: %w", topic, ctx.Err())
		case <-tick.C:
		}
	}
}

// probe produces n timers due evenly over window and measures, for each,
// when a read_committed consumer of the deliveries topic sees it.
func probe(ctx context.Context, kc hkafka.Config, cl *kgo.Client, n int, window time.Duration) (late []time.Duration, early int, err error) {
	opts, _ := kc.Opts()
	cons, err := kgo.NewClient(append(opts,
		kgo.ConsumeTopics(kc.Topics().Deliveries),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(50*time.Millisecond),
	)...)
	if err != nil {
		return nil, 0, err
	}
	defer cons.Close()
	base := time.Now().Add(5 * time.Second)
	dueOf := map[string]time.Time{}
	var recs []*kgo.Record
	for i := range n {
		due := base.Add(window * time.Duration(i) / time.Duration(n))
		r := delivery(10_000_000+i, due)
		r.Topic = kc.Topics().Retries
		recs = append(recs, r)
		dueOf[fmt.Sprintf("dlv_bench_%d", 10_000_000+i)] = due
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return nil, 0, err
	}
	pctx, cancel := context.WithDeadline(ctx, base.Add(window+30*time.Second))
	defer cancel()
	for len(late)+early < n {
		fs := cons.PollFetches(pctx)
		seen := time.Now()
		if pctx.Err() != nil {
			return late, early, fmt.Errorf("only %d of %d probes released in time", len(late)+early, n)
		}
		fs.EachRecord(func(r *kgo.Record) {
			var d hooklinev1.Delivery
			if proto.Unmarshal(r.Value, &d) != nil {
				return
			}
			due, ok := dueOf[d.GetDeliveryId()]
			if !ok {
				return
			}
			delete(dueOf, d.GetDeliveryId())
			if seen.Before(due) {
				early++
				return
			}
			late = append(late, seen.Sub(due))
		})
	}
	return late, early, nil
}

// sampler tracks a process's resident memory from /proc.
type sampler struct {
	pid       int
	mu        sync.Mutex
	last, hwm int64
}

func newSampler(pid int) *sampler { return &sampler{pid: pid} }

func (s *sampler) run(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		s.read()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *sampler) read() {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", s.pid))
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	s.mu.Lock()
	defer s.mu.Unlock()
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "VmRSS:":
			s.last = v
		case "VmHWM:":
			s.hwm = v
		}
	}
}

func (s *sampler) current() int64 {
	s.read()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// settled reads RSS after d without new work.
func (s *sampler) settled(ctx context.Context, d time.Duration) int64 {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	return s.current()
}

func (s *sampler) peak() int64 {
	s.read()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hwm
}

// lastLiveHeap returns the live heap after the scheduler's last garbage
// collection, from its gctrace lines ("gc N @…: …, A->B->C MB, …").
func lastLiveHeap(logPath string) string {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return "unknown"
	}
	live := "unknown"
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "gc ") {
			continue
		}
		for _, f := range strings.Split(line, ", ") {
			if parts := strings.Split(strings.TrimSuffix(f, " MB"), "->"); len(parts) == 3 && strings.HasSuffix(f, " MB") {
				live = parts[2] + " MB (" + strings.Fields(line)[2] + " into the run)"
			}
		}
	}
	return live
}
