// Package filter validates event types and matches them against an
// endpoint's event-type filter.
package filter

import (
	"fmt"
	"strings"
)

// MaxTypeLen is the longest event type accepted.
const MaxTypeLen = 128

// ValidateType checks an event type: dot-separated segments of letters,
// digits, '_' and '-', at most MaxTypeLen bytes, e.g. "invoice.paid".
func ValidateType(t string) error {
	if t == "" {
		return fmt.Errorf("is empty")
	}
	if len(t) > MaxTypeLen {
		return fmt.Errorf("is %d bytes, the limit is %d", len(t), MaxTypeLen)
	}
	for seg := range strings.SplitSeq(t, ".") {
		if seg == "" {
			return fmt.Errorf("%q has an empty segment; use dot-separated names like \"invoice.paid\"", t)
		}
		for _, r := range seg {
			if !nameRune(r) {
				return fmt.Errorf("%q contains %q; use letters, digits, '_', '-' and '.'", t, r)
			}
		}
	}
	return nil
}

// patternRule is what a refused pattern with a '*' is told.
const patternRule = `a filter is an exact event type, a prefix followed by only a trailing ".*" (invoice.* matches invoice.paid and invoice.payment.failed), or "*" for every type`

// ValidatePattern checks one filter entry: an exact event type, a prefix
// wildcard "invoice.*", or "*" for every type. A '*' anywhere else, or
// ".*" with no prefix, is refused with that rule.
func ValidatePattern(p string) error {
	if p == "*" {
		return nil
	}
	prefix, wild := strings.CutSuffix(p, ".*")
	if strings.Contains(prefix, "*") || (wild && prefix == "") {
		return fmt.Errorf("%q: %s", p, patternRule)
	}
	return ValidateType(prefix)
}

// Match reports whether eventType passes the filter patterns. An empty
// filter matches every type; "invoice.*" matches "invoice.paid" and
// "invoice.payment.failed" but not "invoice".
func Match(patterns []string, eventType string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if p == "*" || p == eventType {
			return true
		}
		if prefix, ok := strings.CutSuffix(p, "*"); ok && strings.HasSuffix(prefix, ".") && strings.HasPrefix(eventType, prefix) {
			return true
		}
	}
	return false
}

func nameRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-'
}
