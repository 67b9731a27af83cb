package e2e

import (
	"context"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/services/ingest/ingest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

// Two ingest replicas whose endpoint views disagree for a moment: the
// tests hold back one replica's reads of the endpoints topic (kfake
// faults its fetches, selected by the replica's rack) while the other
// writes, which is what a slow fetch or a busy replica does in
// production, made deterministic. They need kfake's fault injection.

const laggingRack = "lagging-replica"

// faultyStack starts a stack on a kfake cluster the test can fault.
func faultyStack(t *testing.T, configure ...func(*stackConfig)) (*stack, *kfake.Cluster) {
	t.Helper()
	if v := os.Getenv(envKafka); v != "" && v != "kfake" {
		t.Skip("needs kfake's fault injection to make one replica lag")
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	st := startStack(t, append([]func(*stackConfig){func(sc *stackConfig) { sc.kafka.Brokers = c.ListenAddrs() }}, configure...)...)
	return st, c
}

// startLaggingReplica starts one more ingest whose Kafka clients name
// laggingRack, so holdBack can stall its reads.
func (st *stack) startLaggingReplica() *grpc.ClientConn {
	st.t.Helper()
	ic := defaults[ingest.Config](st.t)
	ic.Kafka = st.kafka
	ic.Kafka.ClientOpts = append(slices.Clip(ic.Kafka.ClientOpts), kgo.Rack(laggingRack))
	ic.APIKeys = []string{testTenant + ":" + st.apiKey}
	ic.AllowHTTP, ic.AllowPrivate = true, true
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		st.t.Fatal(err)
	}
	in, err := ingest.New(ic, ingest.WithListener(ln), ingest.WithLogger(testLogger(st.t, "ingest-lagging")))
	if err != nil {
		st.t.Fatal(err)
	}
	var svc vservice
	svc.start(st, in.Run)
	st.t.Cleanup(svc.halt)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		st.t.Fatal(err)
	}
	st.t.Cleanup(func() { conn.Close() })
	st.waitServingOn(conn)
	return conn
}

// holdBack stalls the lagging replica's reads of the endpoints topic
// until the returned function is called (a retriable error the client
// retries on its own).
func holdBack(st *stack, c *kfake.Cluster) (release func()) {
	h := c.Fault(kfake.Fault{
		Keys:  []kmsg.Key{kmsg.Fetch},
		Topic: st.topics.Endpoints,
		Err:   kerr.NotLeaderForPartition,
		Count: -1,
		When: func(r kmsg.Request) bool {
			f, ok := r.(*kmsg.FetchRequest)
			return ok && f.Rack == laggingRack
		},
	})
	return h.Remove
}

// observe counts requests of key touching the endpoints topic.
func observe(st *stack, c *kfake.Cluster, key kmsg.Key) *kfake.FaultHandle {
	return c.Fault(kfake.Fault{Keys: []kmsg.Key{key}, Topic: st.topics.Endpoints, Observe: true, Count: -1})
}

func waitHits(t *testing.T, h *kfake.FaultHandle, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	if err := h.Wait(ctx, n); err != nil {
		t.Fatalf("waiting for %d requests: %v", n, err)
	}
}

func TestAnEndpointCreatedThroughOneReplicaGetsTheNextPublishThroughAnother(t *testing.T) {
	st, c := faultyStack(t)
	lagging := st.startLaggingReplica()
	rx := newReceiver(t, 200)

	release := holdBack(st, c)
	defer release()
	listed := observe(st, c, kmsg.ListOffsets)
	ep := st.createEndpoint(rx.URL) // through the first replica

	type result struct {
		resp *hooklinev1.PublishEventResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := hooklinev1.NewEventServiceClient(lagging).PublishEvent(st.ctx(), &hooklinev1.PublishEventRequest{EventType: "order.created", Payload: []byte(`{}`)})
		done <- result{resp, err}
	}()
	barrier := make(chan struct{})
	go func() {
		if listed.Wait(st.failed, 1) == nil {
			close(barrier)
		}
	}()
	var r result
	select {
	case r = <-done: // answered from the stale view, without a barrier
	case <-barrier:
		release() // the replica's view may catch up now
		r = <-done
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := r.resp.GetDeliveries(); len(got) != 1 || got[0].GetEndpointId() != ep.GetEndpoint().GetId() {
		t.Fatalf("publish through another replica right after the create made deliveries %v, want one to %s", got, ep.GetEndpoint().GetId())
	}
}

func TestConcurrentEndpointChangesThroughTwoReplicasLoseNothing(t *testing.T) {
	st, c := faultyStack(t)
	lagging := st.startLaggingReplica()
	a, b := st.endpoints(), hooklinev1.NewEndpointServiceClient(lagging)
	id := st.createEndpoint("http://127.0.0.1:9/hooks").GetEndpoint().GetId()
	if _, err := b.GetEndpoint(st.ctx(), &hooklinev1.GetEndpointRequest{Id: id}); err != nil {
		t.Fatal(err) // b's view has it now
	}

	// A rotates the secret while b, not having read that yet, changes
	// the description: both changes are written from version 1.
	release := holdBack(st, c)
	produced := observe(st, c, kmsg.Produce)
	rot, err := a.RotateEndpointSecret(st.ctx(), &hooklinev1.RotateEndpointSecretRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	updated := make(chan error, 1)
	var upd *hooklinev1.UpdateEndpointResponse
	go func() {
		var err error
		upd, err = b.UpdateEndpoint(st.ctx(), &hooklinev1.UpdateEndpointRequest{
			Endpoint:   &hooklinev1.Endpoint{Id: id, Description: "changed through b"},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"description"}},
		})
		updated <- err
	}()
	waitHits(t, produced, 2) // the rotation and b's first try
	release()
	if err := <-updated; err != nil {
		t.Fatalf("update without etag racing a rotation: %v (it should re-read and apply again)", err)
	}
	got, err := a.GetEndpoint(st.ctx(), &hooklinev1.GetEndpointRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetSecret() != rot.GetSecret() || got.GetEndpoint().GetDescription() != "changed through b" {
		t.Fatalf("after a rotation and a concurrent update: secret rotated %v, description %q; want both changes kept",
			got.GetSecret() == rot.GetSecret(), got.GetEndpoint().GetDescription())
	}
	if got.GetEndpoint().GetEtag() != upd.GetEndpoint().GetEtag() {
		t.Fatalf("etag %q after the update, the update answered %q", got.GetEndpoint().GetEtag(), upd.GetEndpoint().GetEtag())
	}
	etag := got.GetEndpoint().GetEtag()

	// With an etag, a change that loses the race is refused, not retried:
	// b's view still says etag is current when a's change is written.
	release = holdBack(st, c)
	produced = observe(st, c, kmsg.Produce)
	if _, err := a.UpdateEndpoint(st.ctx(), &hooklinev1.UpdateEndpointRequest{
		Endpoint:   &hooklinev1.Endpoint{Id: id, Description: "second change through a"},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"description"}},
	}); err != nil {
		t.Fatal(err)
	}
	go func() {
		_, err := b.UpdateEndpoint(st.ctx(), &hooklinev1.UpdateEndpointRequest{
			Endpoint:   &hooklinev1.Endpoint{Id: id, Description: "from a stale read", Etag: etag},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"description"}},
		})
		updated <- err
	}()
	waitHits(t, produced, 2)
	release()
	if err := <-updated; status.Code(err) != codes.Aborted {
		t.Fatalf("update with an etag that lost the race: %v, want ABORTED", err)
	}
	// Once b has caught up the same etag is refused before anything is written.
	_, err = b.UpdateEndpoint(st.ctx(), &hooklinev1.UpdateEndpointRequest{
		Endpoint:   &hooklinev1.Endpoint{Id: id, Description: "from a stale read", Etag: etag},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"description"}},
	})
	if status.Code(err) != codes.Aborted || !strings.Contains(status.Convert(err).Message(), "re-read") {
		t.Fatalf("stale etag: %v, want ABORTED telling to re-read", err)
	}

	// Compaction keeps the last record of the key: a replica started
	// after it must see the winners, not b's losing records.
	c.Compact()
	fresh := hooklinev1.NewEndpointServiceClient(st.startReplica())
	got, err = fresh.GetEndpoint(st.ctx(), &hooklinev1.GetEndpointRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetSecret() != rot.GetSecret() || got.GetEndpoint().GetDescription() != "second change through a" {
		t.Fatalf("after compaction a new replica reads secret rotated %v, description %q; want the winners",
			got.GetSecret() == rot.GetSecret(), got.GetEndpoint().GetDescription())
	}
}

func TestADeletedEndpointStaysDeletedDespiteAConcurrentChange(t *testing.T) {
	st, c := faultyStack(t)
	lagging := st.startLaggingReplica()
	a, b := st.endpoints(), hooklinev1.NewEndpointServiceClient(lagging)
	id := st.createEndpoint("http://127.0.0.1:9/hooks").GetEndpoint().GetId()
	if _, err := b.GetEndpoint(st.ctx(), &hooklinev1.GetEndpointRequest{Id: id}); err != nil {
		t.Fatal(err)
	}
	release := holdBack(st, c)
	produced := observe(st, c, kmsg.Produce)
	if _, err := a.DeleteEndpoint(st.ctx(), &hooklinev1.DeleteEndpointRequest{Id: id}); err != nil {
		t.Fatal(err)
	}
	paused := make(chan error, 1)
	go func() {
		_, err := b.PauseEndpoint(st.ctx(), &hooklinev1.PauseEndpointRequest{Id: id, Reason: "maintenance"})
		paused <- err
	}()
	waitHits(t, produced, 2) // the tombstone and b's pause
	release()
	if err := <-paused; status.Code(err) != codes.NotFound {
		t.Fatalf("pause racing a delete: %v, want NOT_FOUND once it sees the delete", err)
	}
	for name, cl := range map[string]hooklinev1.EndpointServiceClient{"a": a, "b": b} {
		if _, err := cl.GetEndpoint(st.ctx(), &hooklinev1.GetEndpointRequest{Id: id}); status.Code(err) != codes.NotFound {
			t.Fatalf("replica %s after the delete: %v, want NOT_FOUND", name, err)
		}
	}
	c.Compact()
	fresh := hooklinev1.NewEndpointServiceClient(st.startReplica())
	if _, err := fresh.GetEndpoint(st.ctx(), &hooklinev1.GetEndpointRequest{Id: id}); status.Code(err) != codes.NotFound {
		t.Fatalf("a replica started after compaction: %v, want NOT_FOUND", err)
	}
}

// slowResolver answers every name with a public address, except names
// in slow, which it answers only when its context ends.
type slowResolver struct {
	slow    map[string]bool
	entered chan string
}

func (r *slowResolver) lookup(ctx context.Context, host string) ([]net.IP, error) {
	if r.slow[host] {
		r.entered <- host
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return []net.IP{net.ParseIP("93.184.216.34")}, nil
}

func TestASlowDNSAnswerDelaysOnlyItsOwnEndpointChange(t *testing.T) {
	res := &slowResolver{slow: map[string]bool{"slow.test": true}, entered: make(chan string, 1)}
	st := startStack(t, func(c *stackConfig) {
		c.ingest.AllowPrivate = false
		c.ingest.DNSTimeout = 2 * time.Second
		c.ingestOpts = append(c.ingestOpts, ingest.WithResolver(res.lookup))
	})
	a := st.createEndpoint("http://a.test/hooks").GetEndpoint().GetId()
	b := st.createEndpoint("http://b.test/hooks").GetEndpoint().GetId()

	slow := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := st.endpoints().UpdateEndpoint(st.ctx(), &hooklinev1.UpdateEndpointRequest{
			Endpoint: &hooklinev1.Endpoint{Id: a, Url: "http://slow.test/hooks"}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"url"}},
		})
		slow <- err
	}()
	<-res.entered // a's lookup hangs now

	// Every other endpoint's administration goes on meanwhile.
	ctx, cancel := context.WithTimeout(st.ctx(), time.Second)
	defer cancel()
	if _, err := st.endpoints().PauseEndpoint(ctx, &hooklinev1.PauseEndpointRequest{Id: b}); err != nil {
		t.Fatalf("pausing another endpoint while one URL's DNS lookup hangs: %v", err)
	}
	if _, err := st.endpoints().CreateEndpoint(ctx, &hooklinev1.CreateEndpointRequest{Url: "http://c.test/hooks"}); err != nil {
		t.Fatalf("creating an endpoint while one URL's DNS lookup hangs: %v", err)
	}

	// The hanging lookup ends at --dns-timeout, and the answer says so.
	err := <-slow
	if status.Code(err) != codes.Unavailable || time.Since(start) > waitFor {
		t.Fatalf("update whose DNS lookup hangs: %v after %v, want UNAVAILABLE after the 2s DNS timeout", err, time.Since(start))
	}
	got, err := st.endpoints().GetEndpoint(st.ctx(), &hooklinev1.GetEndpointRequest{Id: a})
	if err != nil || got.GetEndpoint().GetUrl() != "http://a.test/hooks" {
		t.Fatalf("endpoint after the failed update: %v, %v; want it unchanged", got.GetEndpoint().GetUrl(), err)
	}
}
