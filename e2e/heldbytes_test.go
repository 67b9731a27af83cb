package e2e

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/kafkatest"
	"github.com/hookline/hookline/services/dispatcher/dispatcher"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kafkaBytes is what recs take in Kafka: keys, values and headers.
func kafkaBytes(recs []*kgo.Record) int {
	n := 0
	for _, r := range recs {
		n += len(r.Key) + len(r.Value)
		for _, h := range r.Headers {
			n += len(h.Key) + len(h.Value)
		}
	}
	return n
}

// TestAPausedEndpointsKafkaBytesStayFlatWhileItHolds: ten 64 KiB events
// to a paused endpoint are held for two minutes: each is parked once,
// without the payload (it stays in the delivery's record in the
// deliveries topic), and nothing more is written while it waits — no
// recheck (F3: ten 1 MiB events wrote ~975 MiB in two minutes; the
// recheck path after it, a few hundred bytes per delivery every 5 s).
// On resume each is delivered once with its payload, read back by
// reference.
func TestAPausedEndpointsKafkaBytesStayFlatWhileItHolds(t *testing.T) {
	inVirtualTime(t, func(t *testing.T) {
		vs := startVirtual(t)
		defer vs.stop()
		vs.wait = time.Hour
		ln, err := vs.vn.Listen("tcp", "127.0.0.1:8080")
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var bodies [][]byte
		srv := &http.Server{Handler: http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			bodies = append(bodies, b)
			mu.Unlock()
		})}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		ep := vs.createEndpoint("http://127.0.0.1:8080/hooks")
		if _, err := vs.endpoints().PauseEndpoint(vs.ctx(), &hooklinev1.PauseEndpointRequest{Id: ep.GetEndpoint().GetId(), Reason: "maintenance"}); err != nil {
			t.Fatal(err)
		}
		const n, size = 10, 64 << 10
		payload := []byte(`"` + string(bytes.Repeat([]byte("x"), size-2)) + `"`)
		for range n {
			vs.publish("invoice.paid", string(payload))
		}
		time.Sleep(2 * time.Minute)

		retries := vs.readFor(vs.topics.Retries, time.Minute)
		parked := vs.readFor(vs.topics.Parked, time.Minute)
		deliveries := vs.readFor(vs.topics.Deliveries, time.Minute)
		if len(retries) != 0 {
			t.Fatalf("%d retries records in two minutes of a pause: a parked delivery must not recheck", len(retries))
		}
		if holds := heldByReference(t, parks(parked)); holds != n {
			t.Fatalf("%d parked records for %d deliveries held two minutes, want one each", holds, n)
		}
		written := kafkaBytes(retries) + kafkaBytes(parked) + kafkaBytes(deliveries)
		limit := n*(size+2<<10) + n*(2<<10) // the originals, and 2 KiB for each park
		t.Logf("%d deliveries of %d bytes held two minutes: %d bytes written to the retries, parked and deliveries topics (limit %d)", n, size, written, limit)
		if written > limit {
			t.Fatalf("holding %d deliveries of %d bytes wrote %d bytes to the retries, parked and deliveries topics, want at most %d", n, size, written, limit)
		}

		if _, err := vs.endpoints().ResumeEndpoint(vs.ctx(), &hooklinev1.ResumeEndpointRequest{Id: ep.GetEndpoint().GetId()}); err != nil {
			t.Fatal(err)
		}
		results := kafkatest.Decode(t, vs.readN(vs.topics.Results, 2*n), newResult)
		for _, r := range results {
			if s := r.GetState(); s != hooklinev1.DeliveryState_DELIVERY_STATE_PARKED && s != hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED {
				t.Fatalf("unexpected result %v", r)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if len(bodies) != n {
			t.Fatalf("receiver got %d requests after the resume, want %d", len(bodies), n)
		}
		for i, b := range bodies {
			if !bytes.Equal(b, payload) {
				t.Fatalf("request %d carried %d bytes, want the %d-byte payload as published", i, len(b), len(payload))
			}
		}
	})
}

// parks returns the park records among recs (records of the parked
// topic): not the scheduler's sync markers, not tombstones.
func parks(recs []*kgo.Record) []*kgo.Record {
	var out []*kgo.Record
	for _, r := range recs {
		marker := false
		for _, h := range r.Headers {
			marker = marker || h.Key == "hookline-sync"
		}
		if !marker && r.Value != nil {
			out = append(out, r)
		}
	}
	return out
}

// heldByReference checks that every hold among recs (records of the
// retries topic) names its payload instead of carrying it, and returns
// how many holds there are.
func heldByReference(t *testing.T, recs []*kgo.Record) int {
	t.Helper()
	holds := 0
	for _, d := range kafkatest.Decode(t, recs, func() *hooklinev1.Delivery { return &hooklinev1.Delivery{} }) {
		if d.GetKind() != hooklinev1.DeliveryKind_DELIVERY_KIND_DEFERRED {
			continue
		}
		holds++
		if len(d.GetPayload()) != 0 || d.GetPayloadRecord() == nil {
			t.Fatalf("hold of %s carries %d payload bytes (reference %v): a hold must name its payload, not copy it", d.GetDeliveryId(), len(d.GetPayload()), d.GetPayloadRecord())
		}
	}
	return holds
}

// TestAnOutageHoldsKafkaBytesStayFlatWhileItHolds: the same for outage
// mode. A receiver answers 503 to everything; after two failures the
// endpoint is in outage mode, one delivery probes at a time and the
// others are held, looking again every --outage-recheck (10 s here).
// Over ten minutes each hold is a record without the payload; the
// payload is written only with the originals and with each attempt's
// retry (and its release), so the topics grow with the attempts made,
// not with the rechecks.
func TestAnOutageHoldsKafkaBytesStayFlatWhileItHolds(t *testing.T) {
	inVirtualTime(t, func(t *testing.T) {
		vs := startVirtual(t, func(c *dispatcher.Config) {
			c.OutageAfter = 2
			c.OutageRecheck = 10 * time.Second
		})
		defer vs.stop()
		vs.wait = time.Hour
		rx := vs.receiver(t, "8080", func(int) int { return http.StatusServiceUnavailable })
		defer rx.srv.Close()
		vs.createEndpoint(rx.url)
		const n, size = 10, 64 << 10
		payload := `"` + string(bytes.Repeat([]byte("x"), size-2)) + `"`
		for range n {
			vs.publish("invoice.paid", payload)
		}
		time.Sleep(10 * time.Minute)

		retries := vs.readFor(vs.topics.Retries, time.Minute)
		deliveries := vs.readFor(vs.topics.Deliveries, time.Minute)
		holds := heldByReference(t, retries)
		attempts := len(rx.times())
		if holds < 5*n {
			t.Fatalf("%d holds in ten minutes of outage for %d deliveries (%d attempts): outage mode did not hold them", holds, n, attempts)
		}
		written := kafkaBytes(retries) + kafkaBytes(deliveries)
		// The originals, each attempt's retry and its release with the
		// payload, and 2 KiB for each hold's record and its release.
		limit := (n+2*attempts)*(size+2<<10) + 2*holds*(2<<10)
		t.Logf("%d deliveries of %d bytes in outage mode: %d attempts, %d holds, %d bytes written to the retries and deliveries topics (limit %d; %d if every hold carried the payload)",
			n, size, attempts, holds, written, limit, limit+holds*size)
		if written > limit {
			t.Fatalf("%d attempts and %d holds of %d-byte deliveries wrote %d bytes, want at most %d: holds rewrite the payload", attempts, holds, size, written, limit)
		}
	})
}
