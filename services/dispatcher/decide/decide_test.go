package decide

import (
	"net/http"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/services/dispatcher/attempt"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// top draws the largest jitter: the backoff's nominal delay exactly.
type top struct{}

func (top) Int64N(n int64) int64 { return n - 1 }

var (
	t0    = time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	rules = Rules{MaxAttempts: 5, MaxAge: 72 * time.Hour, RetryAfterMax: time.Hour}
)

func endpoint(rp *hooklinev1.RetryPolicy) *hooklinev1.EndpointRecord {
	return &hooklinev1.EndpointRecord{Endpoint: &hooklinev1.Endpoint{Id: "ep_1", RetryPolicy: rp}}
}

// ladder is a retry policy of one fixed rung, without jitter.
func ladder(maxAttempts uint32, rung time.Duration) *hooklinev1.RetryPolicy {
	return &hooklinev1.RetryPolicy{
		Schedule:    &hooklinev1.RetryPolicy_Ladder{Ladder: &hooklinev1.RetryPolicy_DelayLadder{Delays: []*durationpb.Duration{durationpb.New(rung)}}},
		Jitter:      hooklinev1.RetryPolicy_JITTER_NONE,
		MaxAttempts: maxAttempts,
	}
}

func result(class hooklinev1.OutcomeClass, status int, retryAfter string) attempt.Result {
	return attempt.Result{Class: class, StatusCode: status, RetryAfter: retryAfter, Started: t0, Latency: 100 * time.Millisecond}
}

// TestWhatFollowsAnAttempt: each way an attempt can end, and what
// follows it.
func TestWhatFollowsAnAttempt(t *testing.T) {
	const (
		ok        = hooklinev1.OutcomeClass_OUTCOME_CLASS_SUCCESS
		transient = hooklinev1.OutcomeClass_OUTCOME_CLASS_TRANSIENT
		permanent = hooklinev1.OutcomeClass_OUTCOME_CLASS_PERMANENT
	)
	ended := t0.Add(100 * time.Millisecond)
	fixed := ladder(0, 10*time.Second)
	for _, c := range []struct {
		name   string
		d      *hooklinev1.Delivery
		ep     *hooklinev1.EndpointRecord
		ar     attempt.Result
		then   Then
		state  hooklinev1.DeliveryState
		reason string
		next   time.Time
	}{
		{name: "a 2xx is delivered", d: &hooklinev1.Delivery{Attempt: 1}, ep: endpoint(nil), ar: result(ok, 200, ""),
			then: Deliver, state: hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED},
		{name: "a permanent failure ends the head", d: &hooklinev1.Delivery{Attempt: 1}, ep: endpoint(nil), ar: result(permanent, 400, ""),
			then: EndHead, state: hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, reason: "permanent failure"},
		{name: "a transient failure retries after the endpoint's backoff", d: &hooklinev1.Delivery{Attempt: 1}, ep: endpoint(fixed), ar: result(transient, 500, ""),
			then: Retry, state: hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED, next: ended.Add(10 * time.Second)},
		{name: "a resend is one attempt", d: &hooklinev1.Delivery{Attempt: 1, Kind: hooklinev1.DeliveryKind_DELIVERY_KIND_RESEND}, ep: endpoint(nil), ar: result(transient, 500, ""),
			then: DeadLetter, state: hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, reason: "one-off attempt failed; resends and test events are not retried"},
		{name: "a test event is one attempt", d: &hooklinev1.Delivery{Attempt: 1, Kind: hooklinev1.DeliveryKind_DELIVERY_KIND_TEST}, ep: endpoint(nil), ar: result(transient, 503, ""),
			then: DeadLetter, state: hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, reason: "one-off attempt failed; resends and test events are not retried"},
		{name: "a permanent failure of a resend still ends as a head", d: &hooklinev1.Delivery{Attempt: 1, Kind: hooklinev1.DeliveryKind_DELIVERY_KIND_RESEND}, ep: endpoint(nil), ar: result(permanent, 410, ""),
			then: EndHead, state: hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, reason: "permanent failure"},
		{name: "the last attempt of the default budget gives up", d: &hooklinev1.Delivery{Attempt: 5}, ep: endpoint(nil), ar: result(transient, 500, ""),
			then: EndHead, state: hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, reason: "gave up after 5 attempts"},
		{name: "the endpoint's budget overrides the default", d: &hooklinev1.Delivery{Attempt: 5}, ep: endpoint(ladder(8, time.Second)), ar: result(transient, 500, ""),
			then: Retry, state: hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED, next: ended.Add(time.Second)},
		{name: "a longer Retry-After on 429 wins over the backoff", d: &hooklinev1.Delivery{Attempt: 1}, ep: endpoint(fixed), ar: result(transient, http.StatusTooManyRequests, "120"),
			then: Retry, state: hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED, next: ended.Add(2 * time.Minute)},
		{name: "a shorter Retry-After loses to the backoff", d: &hooklinev1.Delivery{Attempt: 1}, ep: endpoint(fixed), ar: result(transient, http.StatusServiceUnavailable, "2"),
			then: Retry, state: hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED, next: ended.Add(10 * time.Second)},
		{name: "a huge Retry-After is capped", d: &hooklinev1.Delivery{Attempt: 1}, ep: endpoint(fixed), ar: result(transient, http.StatusTooManyRequests, "999999"),
			then: Retry, state: hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED, next: ended.Add(time.Hour)},
		{name: "Retry-After on a 500 is not honoured", d: &hooklinev1.Delivery{Attempt: 1}, ep: endpoint(fixed), ar: result(transient, 500, "120"),
			then: Retry, state: hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED, next: ended.Add(10 * time.Second)},
		{name: "an unparsable Retry-After is ignored", d: &hooklinev1.Delivery{Attempt: 1}, ep: endpoint(fixed), ar: result(transient, http.StatusTooManyRequests, "soon"),
			then: Retry, state: hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED, next: ended.Add(10 * time.Second)},
		{name: "a retry due after the give-up time expires", d: &hooklinev1.Delivery{Attempt: 1, GiveUpAt: timestamppb.New(ended.Add(5 * time.Second))}, ep: endpoint(fixed), ar: result(transient, 500, ""),
			then: EndHead, state: hooklinev1.DeliveryState_DELIVERY_STATE_EXPIRED, reason: "next attempt would be after the give-up time 2026-12-07T12:00:05Z"},
		{name: "a retry due at the give-up time is still made", d: &hooklinev1.Delivery{Attempt: 1, GiveUpAt: timestamppb.New(ended.Add(10 * time.Second))}, ep: endpoint(fixed), ar: result(transient, 500, ""),
			then: Retry, state: hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED, next: ended.Add(10 * time.Second)},
		{name: "a Retry-After past the give-up time expires", d: &hooklinev1.Delivery{Attempt: 1, GiveUpAt: timestamppb.New(ended.Add(time.Minute))}, ep: endpoint(fixed), ar: result(transient, http.StatusTooManyRequests, "120"),
			then: EndHead, state: hooklinev1.DeliveryState_DELIVERY_STATE_EXPIRED, reason: "next attempt would be after the give-up time 2026-12-07T12:01:00Z"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := After(c.d, c.ep, c.ar, rules, top{})
			if got.Then != c.then || got.State != c.state || got.Reason != c.reason || !got.Next.Equal(c.next) {
				t.Fatalf("got %+v\nwant then %v, state %v, reason %q, next %v", got, c.then, c.state, c.reason, c.next)
			}
			if (got.Then == EndHead || got.Then == DeadLetter) && got.Log == "" {
				t.Fatal("an end without its log line")
			}
		})
	}
}

// TestAnEndpointsRetryPolicyOverridesTheBudgets: attempts and age, each
// the endpoint's when set, the default otherwise.
func TestAnEndpointsRetryPolicyOverridesTheBudgets(t *testing.T) {
	if got := rules.Attempts(endpoint(nil)); got != 5 {
		t.Fatalf("default attempts %d, want 5", got)
	}
	if got := rules.Attempts(endpoint(&hooklinev1.RetryPolicy{MaxAttempts: 9})); got != 9 {
		t.Fatalf("endpoint's attempts %d, want 9", got)
	}
	if got := rules.Age(endpoint(&hooklinev1.RetryPolicy{})); got != 72*time.Hour {
		t.Fatalf("default age %v, want 72h", got)
	}
	if got := rules.Age(endpoint(&hooklinev1.RetryPolicy{MaxAge: durationpb.New(time.Hour)})); got != time.Hour {
		t.Fatalf("endpoint's age %v, want 1h", got)
	}
}
