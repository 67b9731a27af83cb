package dispatcher

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/kafkatest"
	"github.com/hookline/hookline/sdk/sign"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestADeliveryReadEarlyGoesRoundAFewTimesAtMostAndNeverFiresEarly
// plays a scheduler whose clock is ahead of the dispatcher's by skew:
// it releases each record the dispatcher writes back when its own clock
// reaches the record's due_at, and the dispatcher reads it lag later.
// The delivery is attempted no earlier than its due time by the
// dispatcher's clock, after at most 1 + log2(skew / how early it was
// first) hops, and late by at most the skew plus the lag.
func TestADeliveryReadEarlyGoesRoundAFewTimesAtMostAndNeverFiresEarly(t *testing.T) {
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer rx.Close()
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for _, skew := range []time.Duration{3 * time.Second, time.Minute, time.Hour} {
		for _, lags := range [][]float64{{0}, {0.5, 0}, {0.9, 0.5, 0.1, 0}, {0.99, 0}} {
			t.Run(fmt.Sprint(skew, lags), func(t *testing.T) {
				clock := newFakeClock(start)
				s := newTestService(t, clock.option())
				s.store.Put(endpoint(rx.URL, sign.GenerateSecret()))
				due := start.Add(skew)
				r, err := hkafka.Record(s.topics.Deliveries, "ep_1", &hooklinev1.Delivery{
					DeliveryId: "dlv_1", EventId: "evt_1", TenantId: "t", EndpointId: "ep_1", EventType: "a.b",
					Payload: []byte(`{}`), Attempt: 2, Kind: hooklinev1.DeliveryKind_DELIVERY_KIND_RETRY, DueAt: timestamppb.New(due),
				})
				if err != nil {
					t.Fatal(err)
				}
				lag := func(hop int) time.Duration {
					return time.Duration(lags[min(hop, len(lags)-1)] * float64(skew))
				}
				first := skew - lag(0) // how early the first read is
				maxHops := 1 + int(math.Ceil(math.Log2(float64(skew)/float64(first))))
				released := due // by the scheduler's clock
				for hop := 0; ; hop++ {
					clock.Set(released.Add(-skew + lag(hop)))
					out := s.handler.handleSafely(t.Context(), r)
					if res := kafkatest.DecodeTopic(t, out, s.topics.Results, newResult); len(res) > 0 {
						at := res[0].GetStartedAt().AsTime()
						if at.Before(due) {
							t.Fatalf("attempted %v before its due time by the dispatcher's clock", due.Sub(at))
						}
						if late := at.Sub(due); late > skew+lag(hop) {
							t.Fatalf("attempted %v late, more than the skew %v plus the lag %v", late, skew, lag(hop))
						}
						if hop > maxHops {
							t.Fatalf("attempted after %d hops, want at most %d", hop, maxHops)
						}
						return
					}
					back := kafkatest.DecodeTopic(t, out, s.topics.Retries, newDelivery)
					if len(out) != 1 || len(back) != 1 {
						t.Fatalf("hop %d: %d records, %d of them on retries; want the delivery back on retries", hop, len(out), len(back))
					}
					if hop > maxHops {
						t.Fatalf("still going round after %d hops", hop)
					}
					if b := back[0]; b.GetAttempt() != 2 || b.GetKind() != hooklinev1.DeliveryKind_DELIVERY_KIND_RETRY {
						t.Fatalf("hop %d changed the delivery: attempt %d, kind %v", hop, b.GetAttempt(), b.GetKind())
					}
					// The scheduler copies the record to deliveries when
					// its clock reaches the due_at it carries.
					released = later(back[0].GetDueAt().AsTime(), released)
					r = &kgo.Record{Topic: s.topics.Deliveries, Key: out[0].Key, Value: out[0].Value, Headers: out[0].Headers}
				}
			})
		}
	}
}

// TestTheEarlyMarkCountsOnlyBesideTheDueAtItWasWrittenWith: a record
// made from a pushed one (a hold, a retry) has a due_at of its own and
// keeps it, whatever headers it copied.
func TestTheEarlyMarkCountsOnlyBesideTheDueAtItWasWrittenWith(t *testing.T) {
	s := newTestService(t)
	due := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	pushed := due.Add(3 * time.Second)
	mark := kgo.RecordHeader{Key: headerEarly, Value: fmt.Appendf(nil, "%d/%d", due.UnixNano(), pushed.UnixNano())}
	for _, tc := range []struct {
		dueAt, want time.Time
	}{
		{pushed, due},
		{pushed.Add(time.Minute), pushed.Add(time.Minute)},
	} {
		r, err := hkafka.Record(s.topics.Deliveries, "ep_1", &hooklinev1.Delivery{DeliveryId: "dlv_1", DueAt: timestamppb.New(tc.dueAt)})
		if err != nil {
			t.Fatal(err)
		}
		r.Headers = append(r.Headers, mark)
		d, err := decodeDelivery(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.GetDueAt().AsTime(); !got.Equal(tc.want) {
			t.Errorf("due_at %v with the mark: due %v, want %v", tc.dueAt, got, tc.want)
		}
	}
}

// TestEarlyHoldsWakeDueDeliveriesInDueOrder: a delivery due within the
// early hold is kept (marked early), one due later is not; what is held
// wakes in due order once due, one of a dropped partition or no longer
// early does not, and next is the first due time (zero when none).
func TestEarlyHoldsWakeDueDeliveriesInDueOrder(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	h := earlyHolds{cfg: &Config{EarlyHold: 2 * time.Second}}
	pw, gone := &partWindow{}, &partWindow{dropped: true}
	en := func(id string, due time.Duration, pw *partWindow) *entry {
		return &entry{part: pw, d: &hooklinev1.Delivery{DeliveryId: id, DueAt: timestamppb.New(t0.Add(due))}}
	}
	if !h.next().IsZero() {
		t.Fatalf("next %v with nothing held, want zero", h.next())
	}
	late, b, a, dropped, moved := en("late", 3*time.Second, pw), en("b", 2*time.Second, pw), en("a", time.Second, pw), en("dropped", time.Second, gone), en("moved", 1500*time.Millisecond, pw)
	if h.hold(late, t0) || late.state == entryEarly {
		t.Fatal("held a delivery due after the early hold")
	}
	for _, x := range []*entry{b, a, dropped, moved} {
		if !h.hold(x, t0) || x.state != entryEarly {
			t.Fatalf("%s not held", x.d.GetDeliveryId())
		}
	}
	moved.state = entryQueued // placed some other way meanwhile
	if got := h.next(); !got.Equal(t0.Add(time.Second)) {
		t.Fatalf("next %v, want %v", got, t0.Add(time.Second))
	}
	var placed []string
	place := func(en *entry, _ time.Time) { placed = append(placed, en.d.GetDeliveryId()) }
	h.wake(t0.Add(500*time.Millisecond), place)
	if len(placed) != 0 {
		t.Fatalf("placed %v before any was due", placed)
	}
	h.wake(t0.Add(2*time.Second), place)
	if fmt.Sprint(placed) != "[a b]" {
		t.Fatalf("placed %v, want [a b]", placed)
	}
	if !h.next().IsZero() || len(h.heap) != 0 {
		t.Fatalf("next %v, %d held after all woke; want zero, none", h.next(), len(h.heap))
	}
}
