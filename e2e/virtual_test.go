package e2e

import (
	"context"
	"net"
	"net/http"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/services/dispatcher/attempt"
	"github.com/hookline/hookline/services/dispatcher/dispatcher"
	"github.com/hookline/hookline/services/ingest/ingest"
	"github.com/hookline/hookline/services/scheduler/scheduler"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// vstack is a whole Hookline on kfake over an in-memory network, for use
// inside a testing/synctest bubble: hours of backoff pass in
// milliseconds of wall time, and every clock the services read is the
// bubble's.
type vstack struct {
	*stack
	vn   *kfake.VirtualNetwork
	stop func()
}

const idleFetchWait = 30 * time.Second

// schedulerFetchWait bounds how long a scheduler partition resumed while
// a fetch is in flight waits for data: production's 250 ms would cost
// the virtual-time tests too many idle fetches; 30 s would let a burst of
// rate-limit deferrals (due milliseconds apart, held in place) come back
// in 30-second waves, which production never sees.
const schedulerFetchWait = 2 * time.Second

// inVirtualTime runs f in a testing/synctest bubble. Virtual time needs
// the broker inside the bubble, so it runs in the kfake tier only.
func inVirtualTime(t *testing.T, f func(t *testing.T)) {
	if v := os.Getenv(envKafka); v != "" && v != "kfake" {
		t.Skip("virtual-time test: runs in the kfake tier only")
	}
	if raceEnabled {
		// Go 1.26's runtime has crashed (SIGSEGV in an idle M of a
		// synctest bubble) under the race detector on this suite; make
		// test-unit runs these tests in a second pass without -race.
		t.Skip("virtual-time test: runs in the pass without -race")
	}
	synctest.Test(t, f)
}

func startVirtual(t *testing.T, configure ...func(*dispatcher.Config)) *vstack {
	t.Helper()
	vn := &kfake.VirtualNetwork{}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(9092), kfake.ListenFn(vn.Listen))
	if err != nil {
		t.Fatal(err)
	}
	kc := defaults[kafkaConfig](t)
	kc.Brokers = cluster.ListenAddrs()
	kc.TopicPrefix = "v."
	kc.Partitions = 1
	// Idle clients poll and heartbeat rarely: each idle round trip costs
	// wall time while virtual hours pass. Nothing waits on them: data
	// wakes a fetch at once, and the scheduler wakes itself for timers.
	kc.ClientOpts = []kgo.Opt{
		kgo.Dialer(vn.DialContext),
		kgo.FetchMaxWait(idleFetchWait),
		kgo.SessionTimeout(90 * time.Second),
		kgo.HeartbeatInterval(30 * time.Second),
	}
	st := &stack{t: t, kafka: kc, apiKey: "key-" + randomHex(16), topics: kc.Topics()}
	st.failed, st.fail = context.WithCancel(t.Context())

	ic := defaults[ingest.Config](t)
	ic.Kafka = kc
	ic.APIKeys = []string{testTenant + ":" + st.apiKey}
	ic.AllowHTTP, ic.AllowPrivate = true, true
	ln, err := vn.Listen("tcp", "127.0.0.1:7070")
	if err != nil {
		t.Fatal(err)
	}
	in, err := ingest.New(ic, ingest.WithListener(ln), ingest.WithLogger(testLogger(t, "ingest")))
	if err != nil {
		t.Fatal(err)
	}
	dc := defaults[dispatcher.Config](t)
	dc.Kafka = kc
	dc.AllowPrivate = true
	dc.TransactionalID = "v-dispatcher"
	dc.ParkRecheck = 5 * time.Minute
	for _, c := range configure {
		c(&dc)
	}
	disp, err := dispatcher.New(dc, dispatcher.WithLogger(testLogger(t, "dispatcher")),
		dispatcher.WithAttemptOptions(attempt.WithDialContext(vn.DialContext)), dispatcher.WithRandSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	sc := defaults[scheduler.Config](t)
	sc.Kafka = kc
	sc.TransactionalID = "v-scheduler"
	// Tiers of a minute and more: a record entering a tier is fetched
	// within idleFetchWait, well before its hold ends. Production's 1 s
	// tier needs a fetch wait well under 1 s (the default 250 ms), which
	// would cost the virtual-time tests 100 000s of idle fetches; its
	// lateness is measured by make bench instead.
	sc.Tiers = []string{"1m", "5m", "30m", "1h"}
	sc.FetchMaxWait = schedulerFetchWait
	st.newScheduler = func() *scheduler.Service {
		s, err := scheduler.New(sc, scheduler.WithLogger(testLogger(t, "scheduler")))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	var ingestSvc, dispatcherSvc vservice
	ingestSvc.start(st, in.Run)
	dispatcherSvc.start(st, disp.Run)
	st.scheduler.start(st, st.newScheduler().Run)

	st.conn, err = grpc.NewClient("passthrough:///127.0.0.1:7070",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return vn.DialContext(ctx, "tcp", addr) }))
	if err != nil {
		t.Fatal(err)
	}
	st.waitServing()
	opts, _ := kc.Opts()
	st.client, err = kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	vs := &vstack{stack: st, vn: vn}
	vs.stop = func() {
		st.conn.Close()
		st.client.Close()
		st.scheduler.halt()
		dispatcherSvc.halt()
		ingestSvc.halt()
		cluster.Close()
	}
	return vs
}

// vreceiver is an HTTP receiver on the virtual network that records the
// (virtual) time of each request.
type vreceiver struct {
	url  string
	mu   sync.Mutex
	at   []time.Time
	code func(n int) int
	srv  *http.Server
}

func (vs *vstack) receiver(t *testing.T, port string, code func(n int) int) *vreceiver {
	t.Helper()
	ln, err := vs.vn.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		t.Fatal(err)
	}
	rx := &vreceiver{url: "http://127.0.0.1:" + port + "/hooks", code: code}
	rx.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rx.mu.Lock()
		rx.at = append(rx.at, time.Now())
		n := len(rx.at)
		rx.mu.Unlock()
		w.WriteHeader(rx.code(n))
	})}
	go func() { _ = rx.srv.Serve(ln) }()
	return rx
}

func (rx *vreceiver) times() []time.Time {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	return append([]time.Time(nil), rx.at...)
}

var _ = hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED
