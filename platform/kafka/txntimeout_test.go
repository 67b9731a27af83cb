package kafka

import (
	"strings"
	"testing"
	"time"
)

func TestTheTransactionTimeoutDefaultsToThreeSessionTimeouts(t *testing.T) {
	got, err := TxnTimeout(0, 10*time.Second)
	if err != nil || got != 30*time.Second {
		t.Fatalf("TxnTimeout(0, 10s) = %v, %v; want 30s", got, err)
	}
	if got, err := TxnTimeout(45*time.Second, 10*time.Second); err != nil || got != 45*time.Second {
		t.Fatalf("TxnTimeout(45s, 10s) = %v, %v; want the set 45s", got, err)
	}
	if _, err := TxnTimeout(5*time.Second, 10*time.Second); err == nil || !strings.Contains(err.Error(), "--transaction-timeout (5s) must be at least --session-timeout (10s)") {
		t.Fatalf("TxnTimeout(5s, 10s): err %v; want one naming both flags", err)
	}
}
