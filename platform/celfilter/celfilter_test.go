package celfilter

import (
	"context"
	"errors"
	"strings"
	"testing"
)

const invoice = `{"amount": 1500, "currency": "EUR", "customer": {"id": "cus_1", "vip": true}, "items": [{"sku": "a"}, {"sku": "b"}]}`

func TestFilterMatchesTheIssueExamples(t *testing.T) {
	tests := []struct {
		name string
		give string
		ev   Event
		want bool
	}{
		{"amount and currency", `payload.amount > 1000 && payload.currency == "EUR"`,
			Event{Type: "invoice.paid", Payload: []byte(invoice)}, true},
		{"amount too small", `payload.amount > 1000 && payload.currency == "EUR"`,
			Event{Type: "invoice.paid", Payload: []byte(`{"amount": 999.5, "currency": "EUR"}`)}, false},
		{"other currency", `payload.amount > 1000 && payload.currency == "EUR"`,
			Event{Type: "invoice.paid", Payload: []byte(`{"amount": 5000, "currency": "USD"}`)}, false},
		{"type prefix and has", `type.startsWith("invoice.") && has(payload.customer.vip)`,
			Event{Type: "invoice.paid", Payload: []byte(invoice)}, true},
		{"type prefix, no vip", `type.startsWith("invoice.") && has(payload.customer.vip)`,
			Event{Type: "invoice.paid", Payload: []byte(`{"customer": {"id": "cus_2"}}`)}, false},
		{"other type", `type.startsWith("invoice.") && has(payload.customer.vip)`,
			Event{Type: "order.created", Payload: []byte(invoice)}, false},
		{"metadata in list", `metadata.region in ["eu", "uk"]`,
			Event{Type: "invoice.paid", Payload: []byte(`{}`), Metadata: map[string]string{"region": "uk"}}, true},
		{"metadata not in list", `metadata.region in ["eu", "uk"]`,
			Event{Type: "invoice.paid", Payload: []byte(`{}`), Metadata: map[string]string{"region": "us"}}, false},
		{"ordering key", `ordering_key == "cus_1"`,
			Event{Type: "invoice.paid", Payload: []byte(`{}`), OrderingKey: "cus_1"}, true},
		{"integer equals JSON number", `payload.amount == 1500`,
			Event{Type: "invoice.paid", Payload: []byte(invoice)}, true},
		{"one pass over a list", `payload.items.exists(i, i.sku == "b")`,
			Event{Type: "invoice.paid", Payload: []byte(invoice)}, true},
		{"guarded metadata read", `"region" in metadata && metadata.region == "eu"`,
			Event{Type: "invoice.paid", Payload: []byte(`{}`)}, false},
		{"guarded nested read", `has(payload.a) && has(payload.a.b) && payload.a.b == 1`,
			Event{Type: "invoice.paid", Payload: []byte(`{"c": 1}`)}, false},
		{"dynamic bool result", `payload.customer.vip`,
			Event{Type: "invoice.paid", Payload: []byte(invoice)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Compile(tt.give)
			if err != nil {
				t.Fatalf("Compile(%q): %v", tt.give, err)
			}
			got, err := f.Match(t.Context(), &tt.ev)
			if err != nil {
				t.Fatalf("Match: %v", err)
			}
			if got != tt.want {
				t.Errorf("Match(%q) = %v, want %v", tt.give, got, tt.want)
			}
		})
	}
}

func TestNonJSONPayloadIsNull(t *testing.T) {
	ev := &Event{Type: "invoice.paid", Payload: []byte("not json")}
	for give, want := range map[string]bool{
		`payload == null`:                  true,
		`type == "invoice.paid"`:           true,
		`payload != null && payload.a > 1`: false,
	} {
		f, err := Compile(give)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := f.Match(t.Context(), ev); err != nil || got != want {
			t.Errorf("Match(%q) = %v, %v; want %v, nil", give, got, err, want)
		}
	}
}

func TestEvaluationErrorIsNoMatch(t *testing.T) {
	tests := []struct{ name, give, wantErr string }{
		{"missing field without has", `payload.customer.tier == "gold"`, "no such key: tier"},
		{"missing metadata key", `metadata.region == "eu"`, "no such key: region"},
		{"type mismatch", `payload.currency > 10`, "no such overload"},
		{"not a bool", `payload.currency`, ErrNotBool.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Compile(tt.give)
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.Match(t.Context(), &Event{Type: "invoice.paid", Payload: []byte(invoice)})
			if got || err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Match(%q) = %v, %v; want false and an error containing %q", tt.give, got, err, tt.wantErr)
			}
		})
	}
}

func TestCompileRefusesWithMessageAndPosition(t *testing.T) {
	tests := []struct{ name, give, want string }{
		{"syntax", `payload.amount >`, "filter:1:17: Syntax error"},
		{"unknown variable", `amount > 1000`, "filter:1:1: undeclared reference to 'amount'"},
		{"arithmetic result", `payload.amount + 1`, "evaluates to int"},
		{"dynamic result", `payload.customer`, ""},
		{"int result", `1 + 2`, "evaluates to int; a filter must evaluate to a bool"},
		{"too long", `type == "` + strings.Repeat("x", MaxExpressionBytes) + `"`, "the limit is 4096"},
		{"over the estimated cost", `payload.items.exists(i, payload.items.exists(j, i == j))`, "estimated worst-case cost"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(tt.give)
			if tt.want == "" { // dynamic: refused only if not bool when run
				if err != nil {
					t.Fatalf("Compile(%q): %v, want a dynamic filter", tt.give, err)
				}
				return
			}
			var ce *CompileError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Compile(%q) = %v; want a CompileError containing %q", tt.give, err, tt.want)
			}
		})
	}
}

func TestEvaluationStopsAtTheCostLimit(t *testing.T) {
	// One pass over a list fits the estimate; a list long enough to cost
	// more than MaxCost stops the evaluation: no match.
	f, err := Compile(`payload.exists(i, i == "never")`)
	if err != nil {
		t.Fatal(err)
	}
	list := "[" + strings.TrimSuffix(strings.Repeat(`"x",`, MaxCost/2), ",") + "]"
	got, err := f.Match(t.Context(), &Event{Type: "t", Payload: []byte(list)})
	if got || err == nil || !strings.Contains(err.Error(), "cost limit") {
		t.Fatalf("Match = %v, %v; want false and a cost limit error", got, err)
	}
	short, err := f.Match(t.Context(), &Event{Type: "t", Payload: []byte(`["x", "never"]`)})
	if !short || err != nil {
		t.Fatalf("Match on a short list = %v, %v; want true", short, err)
	}
}

func TestSmallPayloadsRunUntrackedWithinTheEstimate(t *testing.T) {
	tests := []struct {
		give    string
		wantMin int // fastUpTo at least
		wantMax int // fastUpTo at most
	}{
		{`payload.amount > 1000`, EstimatePayloadBytes, EstimatePayloadBytes},
		{`payload.lines.exists(l, l.sku == "sku_9")`, 4 << 10, 64 << 10},
		{`payload.s.contains("x")`, 64 << 10, EstimatePayloadBytes},
	}
	for _, tt := range tests {
		f, err := Compile(tt.give)
		if err != nil {
			t.Fatal(err)
		}
		if f.fastUpTo < tt.wantMin || f.fastUpTo > tt.wantMax {
			t.Errorf("%q runs untracked up to %d bytes, want %d..%d", tt.give, f.fastUpTo, tt.wantMin, tt.wantMax)
		}
	}
}

func TestEvaluationStopsWhenItsContextEnds(t *testing.T) {
	f, err := Compile(`payload.exists(i, i == "never")`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	// Long enough that the cost is tracked (and the context watched).
	list := "[" + strings.TrimSuffix(strings.Repeat(`"x",`, MaxCost/2), ",") + "]"
	if len(list) <= f.fastUpTo {
		t.Fatalf("a %d-byte payload is evaluated untracked (up to %d)", len(list), f.fastUpTo)
	}
	if got, err := f.Match(ctx, &Event{Type: "t", Payload: []byte(list)}); got || err == nil {
		t.Fatalf("Match = %v, %v; want false and an interrupt error", got, err)
	}
}

func TestEventParsesItsPayloadOnce(t *testing.T) {
	ev := &Event{Type: "invoice.paid", Payload: []byte(invoice)}
	f, err := Compile(`payload.amount > 1000`)
	if err != nil {
		t.Fatal(err)
	}
	if ev.vars != nil {
		t.Fatal("parsed before any filter ran")
	}
	if _, err := f.Match(t.Context(), ev); err != nil {
		t.Fatal(err)
	}
	first := ev.vars
	if _, err := f.Match(t.Context(), ev); err != nil {
		t.Fatal(err)
	}
	if ev.vars != first {
		t.Fatal("the second Match parsed the payload again")
	}
}

func TestCacheCompilesOnceAndIsBounded(t *testing.T) {
	c := NewCache(2)
	a1, err := c.Get(`type == "a"`)
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := c.Get(`type == "a"`)
	if a1 != a2 {
		t.Fatal("the same expression was compiled twice")
	}
	if _, err := c.Get(`nope`); err == nil {
		t.Fatal("a bad expression compiled")
	}
	if _, err := c.Get(`nope`); err == nil {
		t.Fatal("a cached bad expression lost its error")
	}
	_, _ = c.Get(`type == "b"`)
	if c.Len() != 2 {
		t.Fatalf("Len = %d, want 2 (the size)", c.Len())
	}
}
