package celfilter

import (
	"context"
	"errors"
	"testing"
	"time"
)

// FuzzCompileAndMatch: any expression either compiles or is refused
// with a CompileError, and a compiled filter evaluates any payload
// without panicking, answering a match or an
// error, never both.
func FuzzCompileAndMatch(f *testing.F) {
	for _, e := range realistic {
		f.Add(e, []byte(invoice))
	}
	f.Add(`payload.items.exists(i, i.sku == "a")`, []byte(`{"items": [{"sku": "a"}, 1, null, "x"]}`))
	f.Add(`payload == null || payload.a.b > 1`, []byte(`not json`))
	f.Add(`has(payload.x) && payload.x.size() > 2`, []byte(`{"x": [1, 2, 3]}`))
	f.Fuzz(func(t *testing.T, expr string, payload []byte) {
		flt, err := Compile(expr)
		if err != nil {
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("Compile(%q): %v is not a CompileError", expr, err)
			}
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ok, err := flt.Match(ctx, &Event{Type: "invoice.paid", Payload: payload, Metadata: map[string]string{"region": "eu"}})
		if ok && err != nil {
			t.Fatalf("Match(%q) = true with error %v", expr, err)
		}
	})
}
