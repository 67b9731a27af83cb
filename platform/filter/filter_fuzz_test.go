package filter

import (
	"strings"
	"testing"
)

// FuzzMatch checks the event-type filter against a reference reading of
// its documented rules, for every valid pattern and type, and that no
// input, valid or not, panics.
func FuzzMatch(f *testing.F) {
	for _, s := range [][2]string{
		{"invoice.*", "invoice.paid"}, {"invoice.*", "invoice"}, {"*", "a"}, {"invoice.paid", "invoice.paid"},
		{"invoice.*", "invoicex.paid"}, {".*", "x"}, {"a..b", "a..b"}, {"*.*", "a.b"}, {"a.*.*", "a.b.c"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, eventType string) {
		got := Match([]string{pattern}, eventType)
		pErr, tErr := ValidatePattern(pattern), ValidateType(eventType)
		if tErr == nil && (len(eventType) > MaxTypeLen || strings.ContainsAny(eventType, "* \t\n/")) {
			t.Fatalf("ValidateType accepted %q", eventType)
		}
		if pErr != nil || tErr != nil {
			return
		}
		prefix, wild := strings.CutSuffix(pattern, "*")
		want := pattern == "*" || pattern == eventType ||
			wild && strings.HasSuffix(prefix, ".") && strings.HasPrefix(eventType, prefix) && len(eventType) > len(prefix)
		if got != want {
			t.Fatalf("Match(%q, %q) = %v, want %v", pattern, eventType, got, want)
		}
		if !Match(nil, eventType) {
			t.Fatalf("an empty filter refused %q", eventType)
		}
	})
}
