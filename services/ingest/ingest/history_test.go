package ingest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/config"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/tlsconf"
	"github.com/hookline/hookline/platform/tlsconf/tlstest"
	"github.com/hookline/hookline/sdk/ids"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

const historyTestKey = "hk_5f0c9e1a7d3b48e2a6c1f09b7e4d2a8c3b6f1e0d9a7c5b3e1f2d4a6c8e0b2d4f"

// historyRig is one kfake cluster and the ingest instances a test starts
// on it, one at a time, each on the same --data-dir.
type historyRig struct {
	t       *testing.T
	cluster *kfake.Cluster
	kafka   hkafka.Config
	dir     string
	topics  hkafka.Topics
	// configure, when set, changes each ingest's configuration last.
	configure func(*Config)
	// prepare, when set, changes each ingest after New, before Run.
	prepare func(*Service)
	// consoleKeys is the session key file (consoleKeyFile).
	consoleKeys string
	// addr is the gRPC (and HTTP/JSON) address of the last ingest started.
	addr string
	// clientTLS, when set, is how the rig's client reaches ingest.
	clientTLS *tls.Config
	// conn is the client connection to the instance started last.
	conn *grpc.ClientConn
}

func newHistoryRig(t *testing.T) *historyRig {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	kc, err := config.Defaults[hkafka.Config]()
	if err != nil {
		t.Fatal(err)
	}
	kc.Brokers, kc.Partitions = c.ListenAddrs(), 3
	return &historyRig{t: t, cluster: c, kafka: kc, dir: filepath.Join(t.TempDir(), "index"), topics: kc.Topics()}
}

// start runs an ingest on the rig's data dir until the returned stop is
// called, and returns a client connection once it is SERVING.
func (r *historyRig) start(opts ...Option) (hooklinev1.DeliveryServiceClient, func()) {
	t := r.t
	t.Helper()
	ic, err := config.Defaults[Config]()
	if err != nil {
		t.Fatal(err)
	}
	ic.Kafka, ic.DataDir, ic.APIKeys = r.kafka, r.dir, []string{"acme:" + historyTestKey}
	ic.Secrets.InsecurePlaintext = true // the history needs no endpoint secrets
	ic.ConsoleSessionKeyFile = r.consoleKeyFile()
	if r.configure != nil {
		r.configure(&ic)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	svc, err := New(ic, append([]Option{WithListener(ln)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if r.prepare != nil {
		r.prepare(svc)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := svc.Run(ctx); err != nil {
			t.Errorf("ingest: %v", err)
		}
	})
	creds := insecure.NewCredentials()
	if r.clientTLS != nil {
		creds = credentials.NewTLS(r.clientTLS)
	}
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	r.conn = conn
	wctx, wcancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer wcancel()
	w, err := healthpb.NewHealthClient(conn).Watch(wctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		m, err := w.Recv()
		if err != nil {
			t.Fatalf("waiting for SERVING: %v", err)
		}
		if m.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			break
		}
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			conn.Close()
			cancel()
			wg.Wait()
		}
	}
	t.Cleanup(stop)
	return hooklinev1.NewDeliveryServiceClient(conn), stop
}

// consoleKeyFile returns the console session key file every ingest of
// the rig shares (as replicas do), made on first use.
func (r *historyRig) consoleKeyFile() string {
	if r.consoleKeys == "" {
		r.consoleKeys = filepath.Join(r.t.TempDir(), "console-session.key")
		if err := os.WriteFile(r.consoleKeys, []byte(ids.New("", time.Now())+ids.New("", time.Now())+"\n"), 0o600); err != nil {
			r.t.Fatal(err)
		}
	}
	return r.consoleKeys
}

// startTLS is start for an ingest serving mutual TLS: the rig's client
// presents client's certificate and trusts its CA.
func (r *historyRig) startTLS(client tlstest.Files, opts ...Option) (hooklinev1.DeliveryServiceClient, func()) {
	r.t.Helper()
	conf, err := tlsconf.Client(client.CA, client.Cert, client.Key)
	if err != nil {
		r.t.Fatal(err)
	}
	r.clientTLS = conf
	return r.start(opts...)
}

// admin returns an admin client of the rig's cluster, closed with the test.
func (r *historyRig) admin() *kadm.Client {
	r.t.Helper()
	opts, err := r.kafka.Opts()
	if err != nil {
		r.t.Fatal(err)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// topicNames maps the cluster's topic IDs to names (fetches name topics
// by ID).
func (r *historyRig) topicNames() map[[16]byte]string {
	r.t.Helper()
	ts, err := r.admin().ListTopics(r.t.Context())
	if err != nil {
		r.t.Fatal(err)
	}
	out := map[[16]byte]string{}
	for _, d := range ts {
		out[d.ID] = d.Topic
	}
	return out
}

// endOffsets lists the end of every partition of the history topics.
func (r *historyRig) endOffsets() kadm.ListedOffsets {
	r.t.Helper()
	ends, err := r.admin().ListEndOffsets(r.t.Context(), r.topics.Deliveries, r.topics.Results, r.topics.Dead)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		r.t.Fatal(err)
	}
	return ends
}

func (r *historyRig) ctx() context.Context {
	return metadata.AppendToOutgoingContext(r.t.Context(), "authorization", "Bearer "+historyTestKey)
}

// produceHistory writes n events, each delivered to two endpoints: ep_a
// retried once then delivered, ep_b failed and dead-lettered.
func (r *historyRig) produceHistory(n int, at time.Time) {
	t := r.t
	t.Helper()
	opts, err := r.kafka.Opts()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	add := func(topic, key string, m proto.Message) {
		rec, err := hkafka.Record(topic, key, m)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	for i := range n {
		now := at.Add(time.Duration(i) * time.Millisecond)
		evt := ids.New(ids.Event, now)
		typ := []string{"invoice.paid", "invoice.void"}[i%2]
		for _, ep := range []string{"ep_a", "ep_b"} {
			d := &hooklinev1.Delivery{DeliveryId: ids.New(ids.Delivery, now), EventId: evt, TenantId: "acme", EndpointId: ep,
				EventType: typ, Payload: fmt.Appendf(nil, `{"n":%d}`, i), Attempt: 1, CreatedAt: timestamppb.New(now)}
			add(r.topics.Deliveries, ep, d)
			res := func(attempt uint32, st hooklinev1.DeliveryState, code int32) *hooklinev1.AttemptResult {
				return &hooklinev1.AttemptResult{DeliveryId: d.GetDeliveryId(), EventId: evt, TenantId: "acme", EndpointId: ep, EventType: typ,
					Attempt: attempt, State: st, StatusCode: code, StartedAt: timestamppb.New(now.Add(time.Duration(attempt) * time.Second))}
			}
			if ep == "ep_a" {
				retry := res(1, hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED, 503)
				retry.Class, retry.Latency, retry.ResponseExcerpt = hooklinev1.OutcomeClass_OUTCOME_CLASS_TRANSIENT, durationpb.New(120*time.Millisecond), []byte("upstream unavailable")
				retry.NextAttemptAt = timestamppb.New(now.Add(2 * time.Second))
				add(r.topics.Results, ep, retry)
				add(r.topics.Results, ep, res(2, hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED, 200))
			} else {
				last := res(1, hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, 410)
				add(r.topics.Results, ep, last)
				add(r.topics.Dead, ep, &hooklinev1.DeadLetter{Delivery: d, LastResult: last})
			}
		}
	}
	if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// answers asks ingest every question the history answers, paging each
// list to its end, and returns the answers in order.
func (r *historyRig) answers(api hooklinev1.DeliveryServiceClient) []proto.Message {
	t := r.t
	t.Helper()
	var out []proto.Message
	var all []*hooklinev1.DeliveryStatus
	for _, f := range []*hooklinev1.ListDeliveriesRequest{
		{}, {EndpointId: "ep_a"}, {EventType: "invoice.void"},
		{EndpointId: "ep_b", State: hooklinev1.DeliveryState_DELIVERY_STATE_FAILED},
		{State: hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED},
	} {
		f.PageSize = 7
		for {
			resp, err := api.ListDeliveries(r.ctx(), f)
			if err != nil {
				t.Fatalf("ListDeliveries(%v): %v", f, err)
			}
			out = append(out, resp)
			if len(all) == 0 || f.GetEndpointId() == "" && f.GetEventType() == "" && f.GetState() == 0 {
				all = append(all, resp.GetDeliveries()...)
			}
			if resp.GetNextPageToken() == "" {
				break
			}
			f.PageToken = resp.GetNextPageToken()
		}
	}
	for _, d := range all {
		got, err := api.GetDelivery(r.ctx(), &hooklinev1.GetDeliveryRequest{DeliveryId: d.GetDeliveryId()})
		if err != nil {
			t.Fatalf("GetDelivery: %v", err)
		}
		ev, err := api.GetEvent(r.ctx(), &hooklinev1.GetEventRequest{EventId: d.GetEventId()})
		if err != nil {
			t.Fatalf("GetEvent: %v", err)
		}
		out = append(out, got, ev)
	}
	evs, err := api.ListEvents(r.ctx(), &hooklinev1.ListEventsRequest{EventType: "invoice.paid"})
	if err != nil {
		t.Fatalf("ListEvents: %v", err)
	}
	return append(out, evs)
}

func TestHistoryIndexDeletedIsRebuiltFromTheTopicsWithTheSameAnswers(t *testing.T) {
	r := newHistoryRig(t)
	api, stop := r.start()
	r.produceHistory(20, time.Now().Add(-time.Hour))
	before := r.answers(api)
	if n := len(before[0].(*hooklinev1.ListDeliveriesResponse).GetDeliveries()); n != 7 {
		t.Fatalf("first page holds %d deliveries, want 7", n)
	}
	stop()

	if err := os.RemoveAll(r.dir); err != nil {
		t.Fatal(err)
	}
	api, _ = r.start()
	after := r.answers(api)
	if len(after) != len(before) {
		t.Fatalf("%d answers after the rebuild, %d before", len(after), len(before))
	}
	for i := range before {
		if !proto.Equal(before[i], after[i]) {
			t.Fatalf("answer %d differs after the rebuild:\nbefore %v\nafter  %v", i, before[i], after[i])
		}
	}
}

func TestHistoryRestartResumesFromItsStoredOffsets(t *testing.T) {
	r := newHistoryRig(t)
	api, stop := r.start()
	r.produceHistory(20, time.Now().Add(-time.Hour))
	before := r.answers(api)
	stop()

	// What the restarted ingest fetches from each partition of the three
	// topics, seen by the broker.
	names, ends := r.topicNames(), r.endOffsets()
	var mu sync.Mutex
	lowest := map[string]int64{}
	r.cluster.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		mu.Lock()
		defer mu.Unlock()
		for _, ft := range req.(*kmsg.FetchRequest).Topics {
			for _, p := range ft.Partitions {
				topic := ft.Topic
				if topic == "" {
					topic = names[ft.TopicID]
				}
				k := fmt.Sprintf("%s/%d", topic, p.Partition)
				if o, ok := lowest[k]; !ok || p.FetchOffset < o {
					lowest[k] = p.FetchOffset
				}
			}
		}
		return nil, nil, false // observe only
	})
	api, _ = r.start()
	after := r.answers(api)
	for i := range before {
		if !proto.Equal(before[i], after[i]) {
			t.Fatalf("answer %d differs after the restart:\nbefore %v\nafter  %v", i, before[i], after[i])
		}
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("lowest fetch offsets after the restart: %v", lowest)
	checked := 0
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset == 0 {
			return // nothing in the partition, nothing stored for it
		}
		// Nothing was written while ingest was down: it resumes at the
		// end of each partition it had read, never below.
		k := fmt.Sprintf("%s/%d", o.Topic, o.Partition)
		if got, ok := lowest[k]; ok && got != o.Offset {
			t.Errorf("the restarted ingest fetched %s from offset %d, want %d (its stored offset)", k, got, o.Offset)
		}
		checked++
	})
	if checked == 0 {
		t.Fatal("no partition of the history topics holds records; the check proves nothing")
	}
}
