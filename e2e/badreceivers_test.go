package e2e

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/badreceiver"
	"github.com/hookline/hookline/platform/kafkatest"
	"google.golang.org/protobuf/types/known/durationpb"
)

// TestMisbehavingReceiversDoNotStallTheirPartition: every misbehaving
// receiver (platform/badreceiver's mix, plus a self-signed https one)
// shares the one partition of the deliveries topic with a healthy one.
// The healthy receiver gets each of its events within a few seconds of
// the publish while the bad ones' attempts are in flight, and every
// delivery to a bad receiver ends with a terminal outcome within its two
// attempts.
func TestMisbehavingReceiversDoNotStallTheirPartition(t *testing.T) {
	st := startStack(t, func(c *stackConfig) { c.kafka.Partitions = 1 })
	healthy := newCountingReceiver(t, 0)
	healthyID := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: healthy.URL, EventTypes: []string{"healthy.*"}}).GetEndpoint().GetId()

	bad := map[string]string{} // name -> url
	for name, answer := range badreceiver.Mix() {
		s, err := badreceiver.Listen(answer)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		bad[name] = s.URL("/hook")
	}
	tlsRx := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(tlsRx.Close)
	bad["self-signed-tls"] = tlsRx.URL
	var badIDs []string
	for _, name := range slices.Sorted(maps.Keys(bad)) {
		badIDs = append(badIDs, st.createEndpointWith(&hooklinev1.CreateEndpointRequest{
			Url: bad[name], Description: name, EventTypes: []string{"bad.*"},
			Timeout:            durationpb.New(time.Second),
			OutageModeDisabled: true,
			RetryPolicy: &hooklinev1.RetryPolicy{
				Schedule:    &hooklinev1.RetryPolicy_Ladder{Ladder: &hooklinev1.RetryPolicy_DelayLadder{Delays: []*durationpb.Duration{durationpb.New(time.Second)}}},
				Jitter:      hooklinev1.RetryPolicy_JITTER_NONE,
				MaxAttempts: 2,
			},
		}).GetEndpoint().GetId())
	}

	// Rounds of one event to every bad receiver, then one to the healthy
	// one: in a partition that waited on its head, each healthy event
	// would wait for a dozen attempt timeouts.
	const rounds = 3
	sent := map[string]time.Time{} // healthy event id -> publish
	want := map[string]bool{}      // every delivery id
	for range rounds {
		for range badIDs {
			for _, d := range st.publish("bad.tick", `{}`).GetDeliveries() {
				want[d.GetDeliveryId()] = true
			}
		}
		start := time.Now()
		resp := st.publish("healthy.tick", `{}`)
		sent[resp.GetEventId()] = start
		for _, d := range resp.GetDeliveries() {
			if d.GetEndpointId() != healthyID {
				t.Fatalf("healthy event went to %s", d.GetEndpointId())
			}
			want[d.GetDeliveryId()] = true
		}
	}

	// Every delivery ends: the healthy ones DELIVERED, the bad ones
	// FAILED (or, for a body cut after a 200 or an endless 200 body,
	// DELIVERED: the receiver did answer 200).
	rd := st.reader(st.topics.Results)
	defer rd.Close()
	ctx, cancel := context.WithTimeout(st.failed, waitFor)
	defer cancel()
	ended := map[string]*hooklinev1.AttemptResult{}
	for len(ended) < len(want) {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%d of %d deliveries ended within %v", len(ended), len(want), waitFor)
		}
		for _, r := range kafkatest.Decode(t, fs.Records(), func() *hooklinev1.AttemptResult { return &hooklinev1.AttemptResult{} }) {
			switch r.GetState() {
			case hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED, hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, hooklinev1.DeliveryState_DELIVERY_STATE_EXPIRED:
				if ended[r.GetDeliveryId()] != nil {
					t.Fatalf("delivery %s ended twice: %v then %v", r.GetDeliveryId(), ended[r.GetDeliveryId()], r)
				}
				ended[r.GetDeliveryId()] = r
			}
		}
	}
	for id, r := range ended {
		if !want[id] {
			t.Fatalf("result for a delivery never published: %v", r)
		}
		if r.GetEndpointId() == healthyID && r.GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED {
			t.Fatalf("healthy delivery ended %v", r)
		}
	}

	healthy.mu.Lock()
	defer healthy.mu.Unlock()
	for id, start := range sent {
		if len(healthy.arrived[id]) == 0 {
			t.Fatalf("healthy event %s DELIVERED but never received", id)
		}
		// A dozen bad deliveries ahead of it, each up to 1 s: a stalled
		// partition would take over 10 s per healthy event.
		if lat := healthy.arrived[id][0].Sub(start); lat > 5*time.Second {
			t.Errorf("healthy event %s arrived %v after its publish, behind misbehaving receivers", id, lat)
		}
	}
}
