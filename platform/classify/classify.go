// Package classify decides what one delivery attempt's outcome means
// (SPEC R-CLASS): delivered, retry, or dead-letter.
package classify

import (
	"context"
	"errors"
	"strings"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
)

// ErrRefusedDestination marks a dial that the SSRF guard refused. Such an
// outcome is permanent: retrying cannot make the address acceptable.
var ErrRefusedDestination = errors.New("destination address refused")

// ErrCredentialsRefused marks an attempt whose credentials were refused
// before the receiver was reached: an OAuth2 token endpoint that
// answered 400 or 401 to the endpoint's client. Permanent: the client id
// or secret must be fixed.
var ErrCredentialsRefused = errors.New("receiver credentials refused")

// Outcome classifies an attempt from its HTTP status code (0 when no
// response arrived) and its transport error (nil when a response arrived).
func Outcome(status int, err error) hooklinev1.OutcomeClass {
	if err != nil {
		if errors.Is(err, ErrRefusedDestination) || errors.Is(err, ErrCredentialsRefused) {
			return hooklinev1.OutcomeClass_OUTCOME_CLASS_PERMANENT
		}
		// Connect refused, DNS, TLS, reset, timeout (R-CLASS-2): all transient.
		return hooklinev1.OutcomeClass_OUTCOME_CLASS_TRANSIENT
	}
	switch {
	case status >= 200 && status < 300:
		return hooklinev1.OutcomeClass_OUTCOME_CLASS_SUCCESS
	case status == 404:
		return hooklinev1.OutcomeClass_OUTCOME_CLASS_AMBIGUOUS
	case status == 400, status == 401, status == 403, status == 410, status == 422:
		return hooklinev1.OutcomeClass_OUTCOME_CLASS_PERMANENT
	default:
		// 408, 429, 5xx, 3xx (redirects are not followed) and every other
		// code: when in doubt, retry.
		return hooklinev1.OutcomeClass_OUTCOME_CLASS_TRANSIENT
	}
}

// Retryable reports whether an outcome of class c is tried again.
func Retryable(c hooklinev1.OutcomeClass) bool {
	return c == hooklinev1.OutcomeClass_OUTCOME_CLASS_TRANSIENT ||
		c == hooklinev1.OutcomeClass_OUTCOME_CLASS_AMBIGUOUS
}

// IsTimeout reports whether err is an attempt timeout.
func IsTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

// Label is c as a metric or span label: OUTCOME_CLASS_TRANSIENT becomes
// "transient".
func Label(c hooklinev1.OutcomeClass) string {
	return strings.ToLower(strings.TrimPrefix(c.String(), "OUTCOME_CLASS_"))
}
