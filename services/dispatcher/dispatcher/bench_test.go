package dispatcher

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/classify"
	"github.com/hookline/hookline/platform/telemetry"
	"github.com/hookline/hookline/sdk/sign"
	"github.com/hookline/hookline/services/dispatcher/attempt"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// BenchmarkHandle is one delivered attempt end to end in the dispatcher
// (decode, endpoint lookup, sign, HTTP POST over loopback, outcome
// records) with telemetry off (the default: no-op providers) and on
// (SDK providers, every span recorded and batched, metrics collected).
//
//	go test -run '^$' -bench Handle -benchmem ./dispatcher
func BenchmarkHandle(b *testing.B) {
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer rx.Close()
	secret := sign.GenerateSecret()
	run := func(b *testing.B, opt Option) {
		s := newTestService(b, opt)
		s.store.Put(endpoint(rx.URL, secret))
		r := deliveryRecord(b, s)
		b.ReportAllocs()
		for b.Loop() {
			if out := s.handler.handleSafely(context.Background(), r); len(out) == 0 {
				b.Fatal("no records")
			}
		}
	}
	b.Run("telemetry=off", func(b *testing.B) {
		run(b, WithTelemetry(tracenoop.NewTracerProvider(), metricnoop.NewMeterProvider()))
	})
	b.Run("telemetry=on", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		defer func() { _ = tp.Shutdown(context.Background()) }()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		run(b, WithTelemetry(tp, mp))
	})
}

// BenchmarkInstrumentationOff is only what telemetry adds to one
// delivery when it is off: the process span, its attributes, trace
// header propagation onto the output, and the metric calls.
func BenchmarkInstrumentationOff(b *testing.B) {
	s := newTestService(b, WithTelemetry(tracenoop.NewTracerProvider(), metricnoop.NewMeterProvider()))
	r := deliveryRecord(b, s)
	out := s.writer.records(s.topics.Retries, "ep_1", s.writer.result(nil, s.now()))
	h := http.Header{}
	b.ReportAllocs()
	for b.Loop() {
		ctx, span := s.handler.startProcess(context.Background(), r)
		setOutcome(ctx, "delivered")
		s.metrics.attempts.Add(ctx, 1)
		s.metrics.duration.Record(ctx, 0.001)
		s.metrics.deliveries.Add(ctx, 1)
		telemetry.Propagator.Inject(ctx, propagation.HeaderCarrier(h))
		s.writer.stampTrace(r, out)
		span.End()
	}
}

// BenchmarkInnerLoop is the dispatcher's own work per delivered attempt,
// without the network: decode the record, triage it, look up the
// endpoint's credentials, sign the attempt, classify a 204 and encode
// the result record, with telemetry off: for an endpoint with the
// signature only ("plain") and for one with two custom headers (one
// sealed) and OAuth2 auth ("headers+oauth2"; what sending its cached
// token costs is attempt's BenchmarkCredentialsWithCachedToken).
//
//	go test -run '^$' -bench InnerLoop -benchmem ./dispatcher
func BenchmarkInnerLoop(b *testing.B) {
	secret := sign.GenerateSecret()
	run := func(b *testing.B, rec *hooklinev1.EndpointRecord) {
		s := newTestService(b, WithTelemetry(tracenoop.NewTracerProvider(), metricnoop.NewMeterProvider()))
		s.store.Put(rec)
		r := deliveryRecord(b, s)
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			d, err := decodeDelivery(r)
			if err != nil {
				b.Fatal(err)
			}
			v, ep := s.handler.triage(d, s.now(), false)
			if v != toLane {
				b.Fatalf("verdict %v", v)
			}
			if _, err := s.creds.get(ep); err != nil {
				b.Fatal(err)
			}
			signer, err := s.signers.get(ep, s.now())
			if err != nil {
				b.Fatal(err)
			}
			started := s.now()
			_ = signer.Sign(d.GetEventId(), started, d.GetPayload())
			ar := attempt.Result{Class: classify.Outcome(http.StatusNoContent, nil), StatusCode: http.StatusNoContent, Started: started, Latency: time.Millisecond}
			if out := s.handler.attempter.outcome(ctx, d, ep, ar); len(out) != 1 {
				b.Fatalf("%d records", len(out))
			}
		}
	}
	b.Run("plain", func(b *testing.B) { run(b, endpoint("http://127.0.0.1:9/", secret)) })
	b.Run("headers+oauth2", func(b *testing.B) {
		rec := endpoint("http://127.0.0.1:9/", secret)
		rec.Endpoint.Headers = []*hooklinev1.EndpointHeader{{Name: "X-Route", Value: "eu-1"}, {Name: "X-Api-Key", Secret: true, ValueSet: true}}
		rec.Credentials = []*hooklinev1.EndpointCredential{testKeys.SealCredential("t", "ep_1", "header:x-api-key", "k-1")}
		rec.Endpoint.Auth = &hooklinev1.ReceiverAuth{Method: &hooklinev1.ReceiverAuth_Oauth2ClientCredentials{Oauth2ClientCredentials: &hooklinev1.ReceiverAuth_OAuth2ClientCredentials{
			TokenUrl: "http://127.0.0.1:9/token", ClientId: "c", ClientSecretSet: true}}}
		rec.Credentials = append(rec.Credentials, testKeys.SealCredential("t", "ep_1", "auth:client_secret", "cs"))
		run(b, rec)
	})
}
