package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/config"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/telemetry"
	"github.com/hookline/hookline/services/dispatcher/dispatcher"
	"github.com/hookline/hookline/services/ingest/ingest"
	"github.com/hookline/hookline/services/scheduler/scheduler"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

// The suite runs against the broker HOOKLINE_TEST_KAFKA names: "kfake"
// (or unset) starts an in-process kfake cluster per test; anything else
// is a comma-separated bootstrap list of a real Kafka (scripts/kafka.sh
// starts one). Every test uses its own topic prefix, so tests never see
// each other's records on a shared broker.
const envKafka = "HOOKLINE_TEST_KAFKA"

// waitFor bounds every wait on an asynchronous outcome.
const waitFor = 60 * time.Second

func brokers(t *testing.T) []string {
	t.Helper()
	v := os.Getenv(envKafka)
	if v == "" || v == "kfake" {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c.ListenAddrs()
	}
	return strings.Split(v, ",")
}

// defaults returns a T with the defaults of its config tags.
func defaults[T any](t *testing.T) T {
	t.Helper()
	v, err := config.Defaults[T]()
	if err != nil {
		t.Fatal(err)
	}
	switch c := any(&v).(type) {
	case *ingest.Config:
		c.Secrets.KeyFile = testKeyFile
	case *dispatcher.Config:
		c.Secrets.KeyFile = testKeyFile
	}
	return v
}

// testLogger writes a service's logs to the test's output: shown with -v
// or when the test fails.
func testLogger(t *testing.T, service string) *slog.Logger {
	return slog.New(telemetry.TraceHandler(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))).With("service", service)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// stack is one Hookline (ingest and dispatcher) on one Kafka.
type stack struct {
	t      *testing.T
	kafka  hkafka.Config
	conn   *grpc.ClientConn
	addr   string // ingest's port: gRPC and HTTP/JSON
	apiKey string
	topics hkafka.Topics
	admin  *kadm.Client
	client *kgo.Client
	// failed is done when a service failed or the test ended.
	failed context.Context
	fail   context.CancelFunc
	// wait bounds waits for asynchronous outcomes (default waitFor).
	wait time.Duration
	// scheduler and dispatcher run those services; tests stop and
	// restart them.
	scheduler     vservice
	newScheduler  func() *scheduler.Service
	dispatcher    vservice
	newDispatcher func(drain time.Duration) *dispatcher.Service
	// newPeer makes another dispatcher of the same group, with
	// transactional id suffix n (the first is 1).
	// opts (after the stack's own) set what that one dispatcher alone has.
	newPeer func(n int, drain time.Duration, opts ...dispatcher.Option) *dispatcher.Service
}

// vservice runs one service of a stack so a test can stop and restart it.
type vservice struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// start runs run until halt; an error fails the test and ends st's waits.
func (v *vservice) start(st *stack, run func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	v.mu.Lock()
	v.cancel, v.done = cancel, done
	v.mu.Unlock()
	go func() {
		defer close(done)
		if err := run(ctx); err != nil {
			st.t.Errorf("%v", err)
			st.fail()
		}
	}()
}

// halt stops the service and waits until it has returned.
func (v *vservice) halt() {
	v.mu.Lock()
	cancel, done := v.cancel, v.done
	v.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

const testTenant = "acme"

type kafkaConfig = hkafka.Config

// stackConfig is what a test may change before startStack starts the
// services.
type stackConfig struct {
	// kafka is the connection every service and the test's clients use.
	kafka      *hkafka.Config
	ingest     *ingest.Config
	ingestOpts []ingest.Option
	dispatcher *dispatcher.Config
	// dispatcherOpts are passed to every dispatcher the stack makes.
	dispatcherOpts []dispatcher.Option
	scheduler      *scheduler.Config
	// clientCreds is how the test's gRPC connection to ingest
	// authenticates the transport (default plaintext).
	clientCreds credentials.TransportCredentials
	// telemetry gives each service ("ingest", "dispatcher", "scheduler")
	// its providers; nil leaves the global (no-op) ones.
	telemetry func(service string) (trace.TracerProvider, metric.MeterProvider)
}

// telemetryOf returns the providers conf gives service.
func (conf *stackConfig) telemetryOf(service string) (trace.TracerProvider, metric.MeterProvider) {
	if conf.telemetry == nil {
		return otel.GetTracerProvider(), otel.GetMeterProvider()
	}
	return conf.telemetry(service)
}

func startStack(t *testing.T, configure ...func(*stackConfig)) *stack {
	t.Helper()
	kc := defaults[hkafka.Config](t)
	kc.Brokers = brokers(t)
	kc.TopicPrefix = "t" + randomHex(4) + "."
	kc.Partitions = 3
	st := &stack{t: t, kafka: kc, apiKey: "key-" + randomHex(16), topics: kc.Topics()}

	ic := defaults[ingest.Config](t)
	ic.Kafka = kc
	ic.APIKeys = []string{testTenant + ":" + st.apiKey, "other:other-" + randomHex(16)}
	ic.AllowHTTP, ic.AllowPrivate = true, true
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dc := defaults[dispatcher.Config](t)
	dc.Kafka = kc
	dc.AllowPrivate = true
	dc.Group = kc.TopicPrefix + "dispatcher"
	dc.TransactionalID = kc.TopicPrefix + "dispatcher-1"
	sc := defaults[scheduler.Config](t)
	sc.Group = kc.TopicPrefix + "scheduler"
	sc.TransactionalID = kc.TopicPrefix + "scheduler-1"
	conf := &stackConfig{kafka: &kc, ingest: &ic, dispatcher: &dc, scheduler: &sc, clientCreds: insecure.NewCredentials()}
	for _, c := range configure {
		c(conf)
	}
	st.kafka, ic.Kafka, dc.Kafka, sc.Kafka = kc, kc, kc, kc

	in, err := ingest.New(ic, append([]ingest.Option{ingest.WithListener(ln), ingest.WithLogger(testLogger(t, "ingest")),
		ingest.WithTelemetry(conf.telemetryOf("ingest"))}, conf.ingestOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	st.newPeer = func(n int, drain time.Duration, opts ...dispatcher.Option) *dispatcher.Service {
		c := dc
		c.DrainTimeout = drain
		c.TransactionalID = fmt.Sprintf("%sdispatcher-%d", kc.TopicPrefix, n)
		if dc.GroupInstanceID != "" {
			c.GroupInstanceID = fmt.Sprint(dc.GroupInstanceID, n) // static members, one id each
		}
		if dc.AnswersDir != "" {
			c.AnswersDir = filepath.Join(dc.AnswersDir, fmt.Sprint(n)) // one journal each
		}
		name := "dispatcher"
		if n > 1 {
			name = fmt.Sprint("dispatcher-", n)
		}
		d, err := dispatcher.New(c, append([]dispatcher.Option{dispatcher.WithLogger(testLogger(t, name)),
			dispatcher.WithTelemetry(conf.telemetryOf("dispatcher"))}, append(slices.Clip(conf.dispatcherOpts), opts...)...)...)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	st.newDispatcher = func(drain time.Duration) *dispatcher.Service { return st.newPeer(1, drain) }

	st.newScheduler = func() *scheduler.Service {
		s, err := scheduler.New(sc, scheduler.WithLogger(testLogger(t, "scheduler")), scheduler.WithTelemetry(conf.telemetryOf("scheduler")))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	// failed ends when a service stops with an error, so waits give up at
	// once instead of running into their timeout.
	st.failed, st.fail = context.WithCancel(t.Context())
	var ingestSvc vservice
	ingestSvc.start(st, in.Run)
	st.dispatcher.start(st, st.newDispatcher(dc.DrainTimeout).Run)
	st.scheduler.start(st, st.newScheduler().Run)
	t.Cleanup(func() {
		st.scheduler.halt()
		st.dispatcher.halt()
		ingestSvc.halt()
	})

	st.addr = ln.Addr().String()
	st.conn, err = grpc.NewClient(st.addr, grpc.WithTransportCredentials(conf.clientCreds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.conn.Close() })
	st.waitServing()

	opts, err := kc.Opts()
	if err != nil {
		t.Fatal(err)
	}
	st.client, err = kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.client.Close)
	st.admin = kadm.NewClient(st.client)
	return st
}

func (st *stack) waitServing() {
	st.t.Helper()
	st.waitServingOn(st.conn)
}

// waitServingOn waits until the ingest behind conn reports SERVING.
func (st *stack) waitServingOn(conn *grpc.ClientConn) {
	st.t.Helper()
	ctx, cancel := context.WithTimeout(st.failed, waitFor)
	defer cancel()
	// Watch sends the current status, then every change.
	w, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	if err != nil {
		st.t.Fatalf("health watch: %v", err)
	}
	for {
		r, err := w.Recv()
		if err != nil {
			st.t.Fatalf("ingest never became SERVING: %v", err)
		}
		if r.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return
		}
	}
}

// ctx returns a call context authenticated as the test tenant.
func (st *stack) ctx() context.Context {
	return st.ctxAs(st.apiKey)
}

func (st *stack) ctxAs(key string) context.Context {
	return metadata.AppendToOutgoingContext(st.t.Context(), "authorization", "Bearer "+key)
}

func (st *stack) endpoints() hooklinev1.EndpointServiceClient {
	return hooklinev1.NewEndpointServiceClient(st.conn)
}

func (st *stack) events() hooklinev1.EventServiceClient {
	return hooklinev1.NewEventServiceClient(st.conn)
}

// readN consumes topic from its start (read_committed) until it has n
// records or waitFor passes, and fails the test on timeout.
func (st *stack) readN(topic string, n int) []*kgo.Record {
	st.t.Helper()
	return st.readMatching(topic, n, func(*kgo.Record) bool { return true })
}

// readMatching reads topic from its start until n records keep says
// to keep have come, and returns them.
func (st *stack) readMatching(topic string, n int, keep func(*kgo.Record) bool) []*kgo.Record {
	st.t.Helper()
	cl := st.reader(topic)
	defer cl.Close()
	wait := st.wait
	if wait == 0 {
		wait = waitFor
	}
	ctx, cancel := context.WithTimeout(st.failed, wait)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			st.t.Fatalf("%s: got %d matching records, want %d", topic, len(out), n)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if keep(r) {
				out = append(out, r)
			}
		})
	}
	return out
}

// reader consumes topic from its start, committed records only.
func (st *stack) reader(topic string) *kgo.Client {
	st.t.Helper()
	opts, _ := st.kafka.Opts()
	cl, err := kgo.NewClient(append(opts,
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)...)
	if err != nil {
		st.t.Fatal(err)
	}
	return cl
}

// readFor consumes topic from its start (read_committed) for d and
// returns what arrived. Only for virtual time, where waiting costs nothing.
func (st *stack) readFor(topic string, d time.Duration) []*kgo.Record {
	st.t.Helper()
	cl := st.reader(topic)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(st.failed, d)
	defer cancel()
	var out []*kgo.Record
	for ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

// endOffsets returns the sum of the end offsets of topic: how many
// records (and transaction markers) were ever written to it.
func (st *stack) endOffsets(topic string) int64 {
	st.t.Helper()
	ends, err := st.admin.ListEndOffsets(st.t.Context(), topic)
	if err != nil {
		st.t.Fatal(err)
	}
	var sum int64
	ends.Each(func(o kadm.ListedOffset) { sum += o.Offset })
	return sum
}
