package transform

import (
	"fmt"
	"strings"
	"testing"
)

// benchScript is a 50-line transformation of the kind the benchmark
// target names: reshape fields, loop over a list, add headers.
const benchScript = `// Reshapes an order event into the receiver's invoice form.
function cents(n) { return Math.round(n * 100); }
function pick(o, keys) {
  var out = {};
  for (var i = 0; i < keys.length; i++) {
    var k = keys[i];
    if (o[k] !== undefined) {
      out[k] = o[k];
    }
  }
  return out;
}
function lines(items) {
  var out = [];
  for (var i = 0; i < items.length; i++) {
    var it = items[i];
    out.push({
      sku: it.sku,
      qty: it.qty,
      total: cents(it.price * it.qty),
      label: (it.name || "").toUpperCase(),
    });
  }
  return out;
}
function sum(ls) {
  var t = 0;
  for (var i = 0; i < ls.length; i++) {
    t += ls[i].total;
  }
  return t;
}
function handler(webhook) {
  var p = webhook.payload;
  if (p.status === "draft") {
    return { cancel: true };
  }
  var ls = lines(p.items);
  webhook.payload = {
    kind: webhook.eventType,
    customer: pick(p.customer, ["id", "email", "country"]),
    lines: ls,
    total: sum(ls),
    currency: (p.currency || "eur").toUpperCase(),
    note: p.note ? p.note.slice(0, 80) : null,
  };
  webhook.headers["x-total"] = String(webhook.payload.total);
  webhook.headers["x-lines"] = String(ls.length);
  return webhook;
}
`

// benchPayload is a JSON order of about 2 KB.
func benchPayload() []byte {
	var items []string
	for i := range 26 {
		items = append(items, fmt.Sprintf(`{"sku":"SKU-%04d","name":"item number %d","qty":%d,"price":%d.99}`, i, i, i%5+1, i+3))
	}
	return []byte(`{"status":"open","currency":"eur","note":"` + strings.Repeat("n", 200) +
		`","customer":{"id":"cus_123","email":"a@example.com","country":"DE","phone":"+49"},"items":[` +
		strings.Join(items, ",") + `]}`)
}

func BenchmarkRun(b *testing.B) {
	if n := strings.Count(benchScript, "\n"); n != 50 {
		b.Fatalf("script is %d lines, want 50", n)
	}
	p := mustCompile(b, benchScript)
	in := input()
	in.Payload = benchPayload()
	b.SetBytes(int64(len(in.Payload)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Run(b.Context(), in, Limits{MaxPayloadBytes: 1 << 20}); err != nil {
			b.Fatal(err)
		}
	}
}
