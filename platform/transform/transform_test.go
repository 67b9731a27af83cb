package transform

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func input() Webhook {
	return Webhook{
		EventType: "invoice.paid",
		Payload:   []byte(`{"amount":1200,"currency":"EUR"}`),
		URL:       "https://example.com/hook",
		Method:    "POST",
		Headers:   map[string]string{"x-tenant": "t1"},
	}
}

func mustCompile(t testing.TB, src string) *Program {
	t.Helper()
	p, err := Compile(src)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return p
}

func kindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}

func TestReshapesPayloadAndAddsHeader(t *testing.T) {
	p := mustCompile(t, `function handler(w) {
		w.payload = {total: w.payload.amount / 100, cur: w.payload.currency, type: w.eventType};
		w.headers["x-shape"] = "v2";
		w.method = "PUT";
		return w;
	}`)
	res, err := p.Run(t.Context(), input(), Limits{MaxPayloadBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(res.Webhook.Payload), `{"total":12,"cur":"EUR","type":"invoice.paid"}`; got != want {
		t.Errorf("payload = %s, want %s", got, want)
	}
	if res.Webhook.Headers["x-shape"] != "v2" || res.Webhook.Headers["x-tenant"] != "t1" {
		t.Errorf("headers = %v", res.Webhook.Headers)
	}
	if res.Webhook.Method != "PUT" || res.Cancelled || res.Took <= 0 {
		t.Errorf("result = %+v", res)
	}
}

func TestNonJSONPayloadIsAString(t *testing.T) {
	p := mustCompile(t, `function handler(w) { w.payload = typeof w.payload + ":" + w.payload; return w }`)
	in := input()
	in.Payload = []byte("a=1&b=2")
	res, err := p.Run(t.Context(), in, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.Webhook.Payload); got != "string:a=1&b=2" {
		t.Errorf("payload = %q", got)
	}
}

func TestCancel(t *testing.T) {
	p := mustCompile(t, `function handler(w) { return {cancel: w.payload.amount < 5000} }`)
	res, err := p.Run(t.Context(), input(), Limits{})
	if err != nil || !res.Cancelled {
		t.Fatalf("Run = %+v, %v; want cancelled", res, err)
	}
}

func TestThrowFails(t *testing.T) {
	p := mustCompile(t, `function handler(w) { throw new Error("no amount") }`)
	_, err := p.Run(t.Context(), input(), Limits{})
	if kindOf(err) != KindThrow || !strings.Contains(err.Error(), "no amount") {
		t.Fatalf("err = %v, want a throw naming its message", err)
	}
}

func TestInfiniteLoopStopsAtTimeLimit(t *testing.T) {
	p := mustCompile(t, `function handler(w) { for (;;) {} }`)
	start := time.Now()
	_, err := p.Run(t.Context(), input(), Limits{})
	if kindOf(err) != KindTimeout {
		t.Fatalf("err = %v, want a timeout", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("run took %v, want about %v", took, DefaultTimeLimit)
	}
	// The program still runs after a timed-out run (its runtime was dropped).
	p2 := mustCompile(t, `var n = 0; function handler(w) { if (w.payload.loop) for(;;){}; return w }`)
	in := input()
	in.Payload = []byte(`{"loop":true}`)
	if _, err := p2.Run(t.Context(), in, Limits{}); kindOf(err) != KindTimeout {
		t.Fatalf("err = %v, want a timeout", err)
	}
	if _, err := p2.Run(t.Context(), input(), Limits{}); err != nil {
		t.Fatalf("run after a timeout: %v", err)
	}
}

func TestTopLevelLoopRefusedAtCompile(t *testing.T) {
	_, err := Compile(`while (true) {} function handler(w) { return w }`)
	if kindOf(err) != KindTimeout {
		t.Fatalf("err = %v, want a timeout", err)
	}
}

func TestOutputOverMaxPayloadRefused(t *testing.T) {
	p := mustCompile(t, `function handler(w) { w.payload = {big: "x".repeat(2048)}; return w }`)
	_, err := p.Run(t.Context(), input(), Limits{MaxPayloadBytes: 1024})
	if kindOf(err) != KindInvalidOutput || !strings.Contains(err.Error(), "over the limit") {
		t.Fatalf("err = %v, want the 2 KB body refused by a 1 KB limit", err)
	}
}

func TestTenMegabyteOutputRefused(t *testing.T) {
	p := mustCompile(t, `function handler(w) { w.payload = "x".repeat(10 * 1024 * 1024); return w }`)
	_, err := p.Run(t.Context(), input(), Limits{MaxPayloadBytes: 1 << 20})
	// Building 10 MB can itself outrun the time limit on a slow (or -race)
	// machine: either way the output is refused.
	if k := kindOf(err); k != KindInvalidOutput && k != KindTimeout {
		t.Fatalf("err = %v, want the 10 MB body refused", err)
	}
}

func TestReservedHeaderRefused(t *testing.T) {
	tests := []string{"webhook-signature", "Webhook-Id", "content-type", "Content-Length", "host",
		"traceparent", "tracestate", "baggage", "connection", "transfer-encoding", "bad name", ""}
	for _, give := range tests {
		t.Run(give, func(t *testing.T) {
			p := mustCompile(t, `function handler(w) { w.headers[`+jsString(give)+`] = "v"; return w }`)
			_, err := p.Run(t.Context(), input(), Limits{})
			if kindOf(err) != KindInvalidOutput {
				t.Fatalf("err = %v, want header %q refused", err, give)
			}
		})
	}
}

func TestHeaderValueWithNewlineRefused(t *testing.T) {
	p := mustCompile(t, `function handler(w) { w.headers["x-a"] = "v\r\nx-b: 1"; return w }`)
	if _, err := p.Run(t.Context(), input(), Limits{}); kindOf(err) != KindInvalidOutput {
		t.Fatalf("err = %v, want refused", err)
	}
}

func TestMethodMustBePostPutPatch(t *testing.T) {
	p := mustCompile(t, `function handler(w) { w.method = "GET"; return w }`)
	if _, err := p.Run(t.Context(), input(), Limits{}); kindOf(err) != KindInvalidOutput {
		t.Fatalf("err = %v, want GET refused", err)
	}
}

func TestChangedURLGoesThroughValidator(t *testing.T) {
	p := mustCompile(t, `function handler(w) { w.url = "http://169.254.169.254/latest"; return w }`)
	var checked string
	refuse := func(_ context.Context, u string) error { checked = u; return errors.New("internal address") }
	if _, err := p.Run(t.Context(), input(), Limits{ValidateURL: refuse}); kindOf(err) != KindInvalidOutput {
		t.Fatalf("err = %v, want the url refused", err)
	}
	if checked != "http://169.254.169.254/latest" {
		t.Errorf("validator saw %q", checked)
	}
	if _, err := p.Run(t.Context(), input(), Limits{}); kindOf(err) != KindInvalidOutput {
		t.Fatalf("err = %v, want a changed url refused without a validator", err)
	}
	allow := func(context.Context, string) error { return nil }
	res, err := p.Run(t.Context(), input(), Limits{ValidateURL: allow})
	if err != nil || res.Webhook.URL != "http://169.254.169.254/latest" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
}

func TestBadScriptRefused(t *testing.T) {
	tests := []struct {
		name, give, want string
	}{
		{"syntax", `function handler(w) { return w`, "does not compile"},
		{"no handler", `function other(w) { return w }`, "no function handler"},
		{"handler not a function", `var handler = 3`, "no function handler"},
		{"too long", "function handler(w){return w}//" + strings.Repeat("x", MaxScriptBytes), "over the limit"},
		{"no require", `require("fs"); function handler(w) { return w }`, "require"},
		{"no timers", `setTimeout(function(){}, 1); function handler(w) { return w }`, "setTimeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(tt.give)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Compile err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestRuntimeReused(t *testing.T) {
	p := mustCompile(t, `var runs = 0; function handler(w) { runs++; w.headers["x-runs"] = String(runs); return w }`)
	for i := 1; i <= 3; i++ {
		res, err := p.Run(t.Context(), input(), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		// One runtime ran the top level at Compile and serves each
		// sequential run: its global counts them.
		if got, want := res.Webhook.Headers["x-runs"], string(rune('0'+i)); got != want {
			t.Fatalf("run %d: x-runs = %s, want %s (runtime not reused)", i, got, want)
		}
	}
}

func TestCacheCompilesOncePerScript(t *testing.T) {
	c := NewCache(2)
	src := `function handler(w) { return w }`
	a, err := c.Get("t1", src)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := c.Get("t1", src)
	if a != b || c.Len() != 1 {
		t.Fatalf("second Get compiled again (%p, %p, len %d)", a, b, c.Len())
	}
	if _, err := c.Get("t1", `nope(`); err == nil {
		t.Fatal("bad script compiled")
	}
	if _, err := c.Get("t1", `nope(`); err == nil {
		t.Fatal("bad script's error not remembered")
	}
}

func TestConcurrentRuns(t *testing.T) {
	p := mustCompile(t, `function handler(w) { w.payload.n = w.payload.amount * 2; return w }`)
	done := make(chan error)
	for range 16 {
		go func() {
			_, err := p.Run(t.Context(), input(), Limits{})
			done <- err
		}()
	}
	for range 16 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

func jsString(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}

// TestTenantsNeverShareARuntime: a runtime keeps a script's globals from
// one run to the next, so the same script of two tenants must not run
// in one runtime: what one tenant's payloads left in a global would be
// read by the other's.
func TestTenantsNeverShareARuntime(t *testing.T) {
	src := `var seen = 0; function handler(w) { seen++; w.payload = {seen: seen}; return w; }`
	c := NewCache(8)
	run := func(scope string) string {
		t.Helper()
		p, err := c.Get(scope, src)
		if err != nil {
			t.Fatal(err)
		}
		res, err := p.Run(t.Context(), input(), Limits{MaxPayloadBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		return string(res.Webhook.Payload)
	}
	run("tenant-a")
	run("tenant-a")
	if got := run("tenant-b"); got != `{"seen":1}` {
		t.Errorf("tenant-b's first run saw %s: it ran in tenant-a's runtime", got)
	}
}
