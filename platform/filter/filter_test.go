package filter

import (
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	tests := []struct {
		patterns []string
		give     string
		want     bool
	}{
		{nil, "invoice.paid", true},
		{[]string{"*"}, "x", true},
		{[]string{"invoice.paid"}, "invoice.paid", true},
		{[]string{"invoice.paid"}, "invoice.created", false},
		{[]string{"invoice.*"}, "invoice.paid", true},
		{[]string{"invoice.*"}, "invoice.payment.failed", true},
		{[]string{"invoice.*"}, "invoice", false},
		{[]string{"invoice.*"}, "invoices.paid", false},
		{[]string{"user.created", "invoice.*"}, "user.created", true},
		{[]string{"user.created", "invoice.*"}, "user.deleted", false},
	}
	for _, tt := range tests {
		if got := Match(tt.patterns, tt.give); got != tt.want {
			t.Errorf("Match(%v, %q) = %v, want %v", tt.patterns, tt.give, got, tt.want)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, ok := range []string{"invoice.paid", "a", "user_1.created-v2"} {
		if err := ValidateType(ok); err != nil {
			t.Errorf("ValidateType(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "a..b", "a.", "has space", "ünï", string(make([]byte, 129))} {
		if err := ValidateType(bad); err == nil {
			t.Errorf("ValidateType(%q) = nil", bad)
		}
	}
	for _, ok := range []string{"*", "invoice.*", "invoice.paid"} {
		if err := ValidatePattern(ok); err != nil {
			t.Errorf("ValidatePattern(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"in*", ".*", "*.paid"} {
		if err := ValidatePattern(bad); err == nil {
			t.Errorf("ValidatePattern(%q) = nil", bad)
		}
	}
}

// TestRefusedPatternsSayWhatIsAllowed: a filter with a '*' anywhere but
// a trailing ".*" (or alone), and ".*" with no prefix, are refused with
// the rule: an exact type, a prefix and ".*", or "*".
func TestRefusedPatternsSayWhatIsAllowed(t *testing.T) {
	for _, bad := range []string{"*.paid", ".*", "in*", "invoice.*.paid", "invoice*"} {
		err := ValidatePattern(bad)
		if err == nil || !strings.Contains(err.Error(), `only a trailing ".*"`) || !strings.Contains(err.Error(), "invoice.*") {
			t.Errorf("ValidatePattern(%q) = %v; want it to say only a trailing \".*\" is allowed, as in invoice.*", bad, err)
		}
	}
}
