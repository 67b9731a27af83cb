package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/durationpb"
)

// partitionOf is the deliveries partition of endpoint id (deliveries are
// keyed by endpoint id; the producers hash keys as Kafka does).
func partitionOf(id string, partitions int) int32 {
	return int32(kgo.StickyKeyPartitioner(nil).ForTopic("").Partition(&kgo.Record{Key: []byte(id)}, partitions))
}

// TestAHangingHeadDoesNotStopOtherPartitions: one receiver hangs at the
// head of a busy partition, and the deliveries behind it complete but
// cannot be committed past it, filling that partition's part of the
// window. Another partition's deliveries still go out at once — not
// after the hanging attempt's timeout (1 min here). Before, the window
// filled with the stuck partition's records and stopped every poll.
func TestAHangingHeadDoesNotStopOtherPartitions(t *testing.T) {
	const window = 30
	st := startStack(t, func(c *stackConfig) {
		c.dispatcher.WindowRecords = window
	})
	release := make(chan struct{})
	var hanging atomic.Int32
	hang := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hanging.Add(1)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer hang.Close()
	defer close(release)
	var filled, others atomic.Int32
	fill := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { filled.Add(1) }))
	defer fill.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { others.Add(1) }))
	defer other.Close()

	parts := st.kafka.Partitions
	create := func(url, types string, timeout time.Duration) string {
		return st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: url, EventTypes: []string{types}, Timeout: durationpb.New(timeout)}).GetEndpoint().GetId()
	}
	stuck := create(hang.URL, "hang.*", time.Minute)
	// An endpoint of the hanging one's partition, and one of another.
	var sameFound, otherFound bool
	for i := 0; !sameFound || !otherFound; i++ {
		if i > 64 {
			t.Fatal("no endpoints found on the partitions needed")
		}
		if !sameFound {
			if id := create(fill.URL, "fill.*", 10*time.Second); partitionOf(id, parts) == partitionOf(stuck, parts) {
				sameFound = true
			} else if _, err := st.endpoints().DeleteEndpoint(st.ctx(), &hooklinev1.DeleteEndpointRequest{Id: id}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if id := create(other.URL, "other.*", 10*time.Second); partitionOf(id, parts) != partitionOf(stuck, parts) {
			otherFound = true
		} else if _, err := st.endpoints().DeleteEndpoint(st.ctx(), &hooklinev1.DeleteEndpointRequest{Id: id}); err != nil {
			t.Fatal(err)
		}
	}

	st.publish("hang.now", `{}`)
	st.until("the hanging receiver has the head of its partition", func() bool { return hanging.Load() == 1 })
	for range 2 * window {
		st.publish("fill.now", `{}`)
	}
	st.until("the deliveries behind the hanging head fill the window", func() bool { return filled.Load() >= window/3 })
	const n = 5
	for range n {
		st.publish("other.now", `{}`)
	}
	deadline := time.Now().Add(20 * time.Second)
	for others.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("another partition's receiver got %d of %d deliveries in 20 s while one head hangs (its timeout is 1 min)", others.Load(), n)
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-st.failed.Done():
			t.Fatal("a service failed")
		}
	}
}
