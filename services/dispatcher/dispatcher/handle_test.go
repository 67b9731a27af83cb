package dispatcher

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/config"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/keyring"
	"github.com/hookline/hookline/platform/telemetry"
	"github.com/hookline/hookline/sdk/sign"
	"github.com/hookline/hookline/services/dispatcher/attempt"
	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/protobuf/proto"
)

func newTestService(t testing.TB, opts ...Option) *Service {
	t.Helper()
	cfg, err := config.Defaults[Config]()
	if err != nil {
		t.Fatal(err)
	}
	cfg.AllowPrivate = true
	cfg.RateLimit = 0 // these tests attempt one endpoint many times at one instant
	// These tests write their own delivery records, without ingest's MAC
	// (recordauth_test.go checks the MAC).
	cfg.AcceptUnsigned = true
	cfg.Secrets.KeyFile = filepath.Join(t.TempDir(), "secrets.keys")
	if err := os.WriteFile(cfg.Secrets.KeyFile, []byte(testKeyLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, append([]Option{WithRandSeed(42)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testKeyLine is the key file of every test Service; testKeys seals
// the secrets of the endpoints tests make with it.
var (
	testKeyLine = keyring.NewKeyLine(time.Unix(0, 0))
	testKeys    = func() *keyring.Keyring {
		k, err := keyring.Parse([]byte(testKeyLine))
		if err != nil {
			panic(err)
		}
		return k
	}()
)

// endpoint returns endpoint ep_1 of tenant "t" with secrets sealed as
// ingest seals them.
func endpoint(url string, secrets ...string) *hooklinev1.EndpointRecord {
	rec := &hooklinev1.EndpointRecord{
		Endpoint: &hooklinev1.Endpoint{Id: "ep_1", TenantId: "t", Url: url, Status: hooklinev1.EndpointStatus_ENDPOINT_STATUS_ACTIVE},
		Version:  1,
	}
	for _, sec := range secrets {
		es, err := testKeys.Seal("t", "ep_1", sec, time.Unix(0, 0))
		if err != nil {
			panic(err)
		}
		rec.Secrets = append(rec.Secrets, es)
	}
	return rec
}

func deliveryRecord(t testing.TB, s *Service) *kgo.Record {
	t.Helper()
	d := &hooklinev1.Delivery{DeliveryId: "dlv_1", EventId: "evt_1", TenantId: "t", EndpointId: "ep_1", EventType: "a.b", Payload: []byte(`{}`), Attempt: 3}
	r, err := hkafka.Record(s.topics.Deliveries, "ep_1", d)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestWorkerFaultReturnsTheDeliveryUnchanged(t *testing.T) {
	s := newTestService(t)
	s.store.Put(endpoint("http://127.0.0.1:1")) // no secret: signing panics
	in := deliveryRecord(t, s)
	out := s.handler.handleSafely(t.Context(), in)
	if len(out) != 1 || out[0].Topic != s.topics.Deliveries || string(out[0].Value) != string(in.Value) {
		t.Fatalf("want the record back on %s unchanged, got %+v", s.topics.Deliveries, out)
	}
	if header(out[0], headerFaults) != "1" {
		t.Fatalf("fault count header %q, want 1", header(out[0], headerFaults))
	}
	var back hooklinev1.Delivery
	if err := proto.Unmarshal(out[0].Value, &back); err != nil || back.GetAttempt() != 3 || back.GetDueAt() != nil || back.GetFirstAttemptAt() != nil {
		t.Fatalf("attempt count or times changed: %v (%v)", &back, err)
	}
}

func TestUndecodableRecordIsAWorkerFault(t *testing.T) {
	s := newTestService(t)
	out := s.handler.handleSafely(t.Context(), &kgo.Record{Topic: s.topics.Deliveries, Key: []byte("ep_1"), Value: []byte{0xff, 0xff}})
	if out[0].Topic != s.topics.Deliveries || header(out[0], headerFaults) != "1" {
		t.Fatalf("got %s with faults %q", out[0].Topic, header(out[0], headerFaults))
	}
}

func TestShutdownBeforeTheRequestBurnsNoAttempt(t *testing.T) {
	s := newTestService(t)
	rx := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("no request may be sent") }))
	defer rx.Close()
	s.store.Put(endpoint(rx.URL, sign.GenerateSecret()))
	in := deliveryRecord(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	out := s.handler.handleSafely(ctx, in)
	if len(out) != 1 || out[0].Topic != s.topics.Deliveries || string(out[0].Value) != string(in.Value) || header(out[0], headerFaults) != "" {
		t.Fatalf("want the record back unchanged and no fault counted, got %+v", out)
	}
}

// TestDeliveriesFailingTogetherDoNotRetryTogether fails 10,000 deliveries
// at the same instant and checks that equal jitter spreads their second
// attempts over the nominal window [30 s, 60 s] of the default policy.
func TestDeliveriesFailingTogetherDoNotRetryTogether(t *testing.T) {
	s := newTestService(t)
	ep := endpoint("http://127.0.0.1:1", sign.GenerateSecret())
	failedAt := time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC)
	const n = 10_000
	lo, hi := 30*time.Second, 60*time.Second
	buckets := make([]int, 10)
	perMilli := map[int64]int{}
	minD, maxD := hi, lo
	for i := range n {
		d := &hooklinev1.Delivery{DeliveryId: "dlv", EventId: "evt", EndpointId: "ep_1", Attempt: 1}
		out := s.handler.attempter.outcome(t.Context(), d, ep, attempt.Result{Class: hooklinev1.OutcomeClass_OUTCOME_CLASS_TRANSIENT, StatusCode: 503, Started: failedAt})
		var retry hooklinev1.Delivery
		for _, r := range out {
			if r.Topic == s.topics.Retries {
				if err := proto.Unmarshal(r.Value, &retry); err != nil {
					t.Fatal(err)
				}
			}
		}
		if retry.GetDueAt() == nil {
			t.Fatalf("delivery %d: no retry scheduled", i)
		}
		wait := retry.GetDueAt().AsTime().Sub(failedAt)
		if wait < lo || wait > hi {
			t.Fatalf("wait %v outside the equal-jitter window [%v, %v]", wait, lo, hi)
		}
		minD, maxD = min(minD, wait), max(maxD, wait)
		buckets[int((wait-lo)*10/(hi-lo+1))]++
		perMilli[wait.Milliseconds()]++
	}
	if spread := maxD - minD; spread < (hi-lo)/2 {
		t.Fatalf("second attempts spread over %v, want at least half of the %v window", spread, hi-lo)
	}
	for i, c := range buckets {
		if c < n/10*7/10 || c > n/10*13/10 {
			t.Errorf("bucket %d holds %d of %d retries: not spread evenly (%v)", i, c, n, buckets)
		}
	}
	for ms, c := range perMilli {
		if c > 5 {
			t.Errorf("%d deliveries retry in the same millisecond (+%d ms)", c, ms)
		}
	}
}

// TestRetryIsLoggedWithAttemptAndTraceIDs: R-OUT-3's log line, in the
// delivery's trace.
func TestRetryIsLoggedWithAttemptAndTraceIDs(t *testing.T) {
	var buf bytes.Buffer
	s := newTestService(t, WithLogger(slog.New(telemetry.TraceHandler(slog.NewJSONHandler(&buf, nil)))))
	ep := endpoint("http://127.0.0.1:1", sign.GenerateSecret())
	ctx, span := sdktrace.NewTracerProvider().Tracer("t").Start(t.Context(), "process")
	defer span.End()
	d := &hooklinev1.Delivery{DeliveryId: "dlv_1", EventId: "evt_1", EndpointId: "ep_1", Attempt: 2, Payload: []byte(`{"secret":"s3cr3t"}`)}
	s.handler.attempter.outcome(ctx, d, ep, attempt.Result{Class: hooklinev1.OutcomeClass_OUTCOME_CLASS_TRANSIENT, StatusCode: 503, Started: time.Now()})
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("log %q: %v", buf.String(), err)
	}
	sc := span.SpanContext()
	if line["msg"] != "retry scheduled" || line["attempt"] != float64(2) || line["delivery_id"] != "dlv_1" ||
		line["trace_id"] != sc.TraceID().String() || line["span_id"] != sc.SpanID().String() || line["next_attempt_at"] == nil {
		t.Errorf("retry log line %v", line)
	}
	if strings.Contains(buf.String(), "s3cr3t") {
		t.Errorf("payload logged: %s", buf.String())
	}
}

// TestADeliveryNamingAnotherTenantsEndpointIsDeadLetteredUnsigned: the
// deliveries topic is not a signing oracle. A delivery whose tenant does
// not own its endpoint is never sent; it ends FAILED with a reason and a
// dead letter.
func TestADeliveryNamingAnotherTenantsEndpointIsDeadLetteredUnsigned(t *testing.T) {
	s := newTestService(t)
	requests := countingEndpoint(t, s) // tenant "t"
	d := &hooklinev1.Delivery{DeliveryId: "dlv_x", EventId: "evt_x", TenantId: "mallory", EndpointId: "ep_1", EventType: "a.b", Payload: []byte(`{}`), Attempt: 1}
	r, err := hkafka.Record(s.topics.Deliveries, "ep_1", d)
	if err != nil {
		t.Fatal(err)
	}
	out := s.handler.handleSafely(t.Context(), r)
	if n := requests.Load(); n != 0 {
		t.Fatalf("the receiver got %d requests for another tenant's delivery", n)
	}
	var res hooklinev1.AttemptResult
	var dead bool
	for _, o := range out {
		switch o.Topic {
		case s.topics.Results:
			if err := proto.Unmarshal(o.Value, &res); err != nil {
				t.Fatal(err)
			}
		case s.topics.Dead:
			dead = true
		}
	}
	if res.GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_FAILED || !strings.Contains(res.GetReason(), "another tenant") || !dead {
		t.Fatalf("want a FAILED result naming the tenant mismatch and a dead letter, got %v (dead letter: %v)", &res, dead)
	}
}
