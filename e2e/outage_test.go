package e2e

import (
	"net/http"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/kafkatest"
)

// Seed 003's night: the receiver is down from 22:00 to 07:00 and the
// shop sends one event a minute. The bubble's clock starts at "22:00".
const night = 9 * time.Hour

func TestSeedNightWithoutOutageModeBurnsSixOfSevenAttempts(t *testing.T) {
	inVirtualTime(t, func(t *testing.T) {
		vs := startVirtual(t)
		defer vs.stop()
		start := time.Now()
		rx := vs.receiver(t, "8080", func(int) int {
			if time.Since(start) < night {
				return http.StatusServiceUnavailable
			}
			return http.StatusOK
		})
		defer rx.srv.Close()
		vs.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.url, RetryPolicy: ladderPolicy(7, sevenRungs...), OutageModeDisabled: true})
		vs.publish("payment.succeeded", `{"at":"22:00"}`)
		time.Sleep(night)
		if n := len(rx.times()); n != 6 {
			t.Fatalf("by 07:00 the 22:00 event used %d attempts, the seed says 6 of 7", n)
		}
	})
}

func TestSeedNightWithOutageMode(t *testing.T) {
	inVirtualTime(t, func(t *testing.T) {
		vs := startVirtual(t)
		defer vs.stop()
		vs.wait = time.Hour
		start := time.Now()
		type req struct {
			at time.Time
			id string
		}
		var reqs []req
		rx := vs.receiver(t, "8080", func(int) int {
			if time.Since(start) < night {
				return http.StatusServiceUnavailable
			}
			return http.StatusOK
		})
		defer rx.srv.Close()
		inner := rx.srv.Handler
		rx.srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rx.mu.Lock()
			reqs = append(reqs, req{time.Now(), r.Header.Get("webhook-id")})
			rx.mu.Unlock()
			inner.ServeHTTP(w, r)
		})
		vs.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.url, RetryPolicy: ladderPolicy(7, sevenRungs...)})
		var events []string
		tick := time.NewTicker(time.Minute)
		for range int(night / time.Minute) {
			events = append(events, vs.publish("payment.succeeded", `{}`).GetEventId())
			<-tick.C
		}
		tick.Stop()
		results := kafkatest.Decode(t, vs.readFor(vs.topics.Results, 6*time.Minute), func() *hooklinev1.AttemptResult { return &hooklinev1.AttemptResult{} })

		morning := start.Add(night)
		deliveredAt := map[string]time.Time{}
		attempts := map[string]uint32{}
		for _, r := range results {
			if r.GetAttempt() > attempts[r.GetEventId()] {
				attempts[r.GetEventId()] = r.GetAttempt()
			}
			if r.GetState() == hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED {
				deliveredAt[r.GetEventId()] = r.GetStartedAt().AsTime()
			}
		}
		for _, id := range events {
			at, ok := deliveredAt[id]
			if !ok {
				t.Fatalf("event %s not delivered by 07:06", id)
			}
			if at.After(morning.Add(5 * time.Minute)) {
				t.Errorf("event %s delivered at +%v after 07:00, want within 5 minutes", id, at.Sub(morning))
			}
			if attempts[id] > 2 {
				t.Errorf("event %s used %d attempts, want at most 2", id, attempts[id])
			}
		}
		// During the outage, once outage mode holds the deliveries, the
		// receiver sees one probe at a time, a backoff step apart.
		rx.mu.Lock()
		defer rx.mu.Unlock()
		var during []time.Time
		for _, q := range reqs {
			if q.at.Before(morning) {
				during = append(during, q.at)
			}
		}
		t.Logf("%d events; %d requests during the outage", len(events), len(during))
		for i := 6; i < len(during); i++ {
			if gap := during[i].Sub(during[i-1]); gap < time.Minute {
				t.Errorf("requests %d and %d during the outage only %v apart", i, i+1, gap)
			}
		}
	})
}
