package ingest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/config"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/twmb/franz-go/pkg/kfake"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

// publishCallers is how many goroutines BenchmarkPublishEvent publishes
// from (go test ... -args -publish-callers 128).
var publishCallers = flag.Int("publish-callers", 64, "BenchmarkPublishEvent: concurrent PublishEvent callers")

// publishBenchKey is the benchmark tenant's API key.
const publishBenchKey = "hk_3c9a7e1f5b2d48a6c0e9f1b7d3a5c8e2f4b6d0a9c7e5b3f1d2a4c6e8b0d2f4a6"

// BenchmarkPublishEvent drives PublishEvent over gRPC, as a producer
// would, against one ingest on an in-process kfake cluster: no
// dispatcher, so what it measures is ingest (auth, validation, the
// endpoints barrier, fan-out encoding and MACs, the durable produce)
// plus what ingest does in the same process (its delivery index reading
// every record back) and kfake. Callers (--publish-callers, default 64)
// spread over 4 connections publish a 512-byte JSON payload back to back
// to an event type that fans out to 1 or 10 endpoints, limits lifted;
// with a key file, so every record carries its record_mac. In
// "fanout=10,filtered" each of the 10 endpoints has a content filter
// (benchFilters, all matching): what filters cost a publish.
//
//	cd services/ingest && go test -run '^$' -bench PublishEvent -benchtime 20000x \
//	  -cpuprofile cpu.out -memprofile mem.out -blockprofile block.out -mutexprofile mutex.out ./ingest/
//
// It reports publishes/s and deliveries/s of the whole run, and the
// call latency's p50 and p99.
func BenchmarkPublishEvent(b *testing.B) {
	for _, bc := range []struct {
		fanout   int
		filtered bool
	}{{1, false}, {10, false}, {10, true}} {
		name := fmt.Sprintf("fanout=%d", bc.fanout)
		if bc.filtered {
			name += ",filtered"
		}
		// One rig for the sub-benchmark's runs (b.N = 1, then the
		// rest), stopped before the next fan-out's starts.
		var rig *publishRig
		b.Run(name, func(sb *testing.B) {
			if rig == nil {
				rig = newPublishRig(b, bc.fanout, bc.filtered)
			}
			rig.run(sb, *publishCallers)
		})
		if rig != nil {
			rig.close()
		}
	}
}

// publishRig is one ingest on kfake with fanout endpoints on one event
// type, and the connections its callers share.
type publishRig struct {
	stops     []func() // run by close, last first
	conns     []*grpc.ClientConn
	eventType string
	fanout    int
	payload   []byte
}

// benchFilters are realistic content filters that match benchJSON's
// events; endpoint i of a filtered rig has benchFilters[i%len].
var benchFilters = []string{
	`payload.amount > 1000 && payload.currency == "eur"`,
	`type.startsWith("bench.") && has(payload.invoice)`,
	`payload.invoice.startsWith("in_")`,
	`payload.type in ["invoice.paid", "invoice.created"]`,
	`payload.amount >= 100 && payload.amount < 1000000`,
	`ordering_key == "" && payload.currency != "usd"`,
	`has(payload.pad) && size(payload.pad) > 10`,
	`!(payload.currency in ["usd", "gbp"])`,
	`payload.type.endsWith(".paid")`,
	`payload.amount == 4200 || payload.currency == "chf"`,
}

func newPublishRig(b *testing.B, fanout int, filtered bool) *publishRig {
	b.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		b.Fatal(err)
	}
	r := &publishRig{fanout: fanout, eventType: fmt.Sprintf("bench.fanout%d", fanout), payload: benchJSON(512)}
	r.stops = append(r.stops, c.Close)
	b.Cleanup(r.close) // after a failure; close runs once
	kc, err := config.Defaults[hkafka.Config]()
	if err != nil {
		b.Fatal(err)
	}
	kc.Brokers = c.ListenAddrs()
	ic, err := config.Defaults[Config]()
	if err != nil {
		b.Fatal(err)
	}
	ic.Kafka, ic.APIKeys = kc, []string{"acme:" + publishBenchKey}
	ic.AllowHTTP, ic.AllowPrivate = true, true
	ic.PublishRate = 0 // limits lifted, as loadbench runs ingest
	ic.Secrets.KeyFile = writeBenchKeyFile(b)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	svc, err := New(ic, WithListener(ln), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := svc.Run(ctx); err != nil {
			b.Errorf("ingest: %v", err)
		}
	})
	r.stops = append(r.stops, func() { cancel(); wg.Wait() })
	for range 4 {
		conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		r.stops = append(r.stops, func() { conn.Close() })
		r.conns = append(r.conns, conn)
	}
	wctx, wcancel := context.WithTimeout(b.Context(), 60*time.Second)
	defer wcancel()
	w, err := healthpb.NewHealthClient(r.conns[0]).Watch(wctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		b.Fatal(err)
	}
	for {
		m, err := w.Recv()
		if err != nil {
			b.Fatalf("waiting for SERVING: %v", err)
		}
		if m.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			break
		}
	}
	actx := r.auth(b.Context())
	for i := range fanout {
		var f string
		if filtered {
			f = benchFilters[i%len(benchFilters)]
		}
		_, err := hooklinev1.NewEndpointServiceClient(r.conns[0]).CreateEndpoint(actx, &hooklinev1.CreateEndpointRequest{
			Url: fmt.Sprintf("http://127.0.0.1:9/%d", i), EventTypes: []string{r.eventType}, MaxInFlight: 64, RateLimitPerSecond: 100000,
			Filter: f,
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return r
}

// close stops the rig's ingest and cluster.
func (r *publishRig) close() {
	for _, stop := range slices.Backward(r.stops) {
		stop()
	}
	r.stops = nil
}

func (r *publishRig) auth(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+publishBenchKey)
}

// publish makes one PublishEvent call on connection i.
func (r *publishRig) publish(ctx context.Context, i int) error {
	resp, err := hooklinev1.NewEventServiceClient(r.conns[i%len(r.conns)]).PublishEvent(ctx,
		&hooklinev1.PublishEventRequest{EventType: r.eventType, Payload: r.payload})
	if err == nil && len(resp.GetDeliveries()) != r.fanout {
		err = fmt.Errorf("%d deliveries, want %d", len(resp.GetDeliveries()), r.fanout)
	}
	return err
}

// run makes b.N publishes from callers goroutines, after a warm-up of
// one publish per caller, and reports the rates and latencies.
func (r *publishRig) run(b *testing.B, callers int) {
	ctx := r.auth(b.Context())
	var warm sync.WaitGroup
	for i := range callers {
		warm.Go(func() {
			if err := r.publish(ctx, i); err != nil {
				b.Error(err)
			}
		})
	}
	warm.Wait()
	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0 := time.Now(), processCPU()
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				t0 := time.Now()
				if err := r.publish(ctx, c); err != nil {
					b.Error(err)
					return
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), processCPU()-cpu0
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "publishes/s")
	b.ReportMetric(float64(b.N*r.fanout)/elapsed.Seconds(), "deliveries/s")
	// CPU per publish (the whole process: callers, ingest, kfake) is
	// what to compare between runs on a shared machine; the rates
	// depend on how much of the cores the process got.
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/publish")
	b.ReportMetric(cpu.Seconds()/elapsed.Seconds(), "cores")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// processCPU returns the user and system CPU time this process used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// writeBenchKeyFile writes a key file of one fresh key and returns its
// path.
func writeBenchKeyFile(b *testing.B) string {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	path := filepath.Join(b.TempDir(), "secrets.key")
	if err := os.WriteFile(path, []byte("k1 "+base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	return path
}

// benchJSON is a JSON document of size bytes.
func benchJSON(size int) []byte {
	head := `{"type":"invoice.paid","invoice":"in_1NtB2kLkdIwHu7ix","amount":4200,"currency":"eur","pad":"`
	tail := `"}`
	return []byte(head + strings.Repeat("x", size-len(head)-len(tail)) + tail)
}
