package celfilter

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// realistic are filters of the kind the issue names, over benchPayload.
var realistic = []string{
	`payload.amount > 1000 && payload.currency == "EUR"`,
	`type.startsWith("invoice.") && has(payload.customer.vip)`,
	`metadata.region in ["eu", "uk"]`,
	`payload.customer.country == "DE" && payload.amount >= 50`,
	`payload.lines.exists(l, l.sku == "sku_9")`,
}

// benchPayload is an invoice of about 2 KB.
var benchPayload = func() []byte {
	var lines []string
	for i := range 10 {
		lines = append(lines, fmt.Sprintf(`{"sku": "sku_%d", "description": "Line item number %d of the invoice", "quantity": %d, "unit_amount": %d}`, i, i, i+1, 100*(i+1)))
	}
	return fmt.Appendf(nil, `{"id": "in_1MtHbELkdIwHu7ixl4OzzPMv", "object": "invoice", "amount": 1500, "currency": "EUR",
"customer": {"id": "cus_NffrFeUfNV2Hib", "email": "jenny.rosen@example.com", "name": "Jenny Rosen", "country": "DE", "vip": true},
"status": "paid", "created": 1680644467, "due_date": null, "lines": [%s],
"metadata": {"order_id": "6735", "channel": "web"}, "footer": "%s"}`, strings.Join(lines, ","), strings.Repeat("x", 200))
}()

func benchEvent() *Event {
	return &Event{Type: "invoice.paid", Payload: benchPayload, Metadata: map[string]string{"region": "eu"}, OrderingKey: "cus_NffrFeUfNV2Hib"}
}

// BenchmarkFilterMatch measures one (event, endpoint) evaluation, the
// payload already parsed (it is, once per event, by the first filter of
// a fan-out); p99-ns is the 99th percentile of single evaluations.
func BenchmarkFilterMatch(b *testing.B) {
	for _, expr := range realistic {
		b.Run(expr, func(b *testing.B) {
			f, err := Compile(expr)
			if err != nil {
				b.Fatal(err)
			}
			ev := benchEvent()
			if _, err := f.Match(b.Context(), ev); err != nil {
				b.Fatal(err)
			}
			took := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				ok, err := f.Match(b.Context(), ev)
				took = append(took, time.Since(start))
				if !ok || err != nil {
					b.Fatalf("Match = %v, %v", ok, err)
				}
			}
			b.StopTimer()
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)*99/100].Nanoseconds()), "p99-ns")
		})
	}
}

// BenchmarkFilterFanOut measures what a fan-out to len(realistic)
// endpoints with filters costs per event: one parse of the ~2 KB
// payload and one evaluation per endpoint.
func BenchmarkFilterFanOut(b *testing.B) {
	var fs []*Filter
	for _, expr := range realistic {
		f, err := Compile(expr)
		if err != nil {
			b.Fatal(err)
		}
		fs = append(fs, f)
	}
	b.SetBytes(int64(len(benchPayload)))
	for b.Loop() {
		ev := benchEvent()
		for _, f := range fs {
			if ok, err := f.Match(b.Context(), ev); !ok || err != nil {
				b.Fatalf("Match = %v, %v", ok, err)
			}
		}
	}
}

// BenchmarkCompile measures compiling a filter (once per expression:
// the Cache holds it).
func BenchmarkCompile(b *testing.B) {
	for b.Loop() {
		if _, err := Compile(realistic[0]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPayloadParse measures the once-per-event parse of the ~2 KB
// payload into CEL values (what a fan-out with filters pays once).
func BenchmarkPayloadParse(b *testing.B) {
	b.SetBytes(int64(len(benchPayload)))
	for b.Loop() {
		_ = payloadValue(benchPayload)
	}
}
