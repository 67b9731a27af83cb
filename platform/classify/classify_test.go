package classify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
)

const (
	success   = hooklinev1.OutcomeClass_OUTCOME_CLASS_SUCCESS
	transient = hooklinev1.OutcomeClass_OUTCOME_CLASS_TRANSIENT
	permanent = hooklinev1.OutcomeClass_OUTCOME_CLASS_PERMANENT
	ambiguous = hooklinev1.OutcomeClass_OUTCOME_CLASS_AMBIGUOUS
)

func TestOutcomeEveryRowOfRClass(t *testing.T) {
	tests := []struct {
		give int
		want hooklinev1.OutcomeClass
	}{
		{200, success}, {201, success}, {202, success}, {204, success}, {299, success},
		{408, transient}, {429, transient},
		{500, transient}, {502, transient}, {503, transient}, {504, transient}, {599, transient},
		{400, permanent}, {401, permanent}, {403, permanent}, {410, permanent}, {422, permanent},
		{404, ambiguous},
		// Anything else: when in doubt, retry. 3xx is an outcome, not a hop.
		{301, transient}, {302, transient}, {304, transient}, {307, transient}, {308, transient},
		{402, transient}, {405, transient}, {409, transient}, {413, transient}, {418, transient},
		{100, transient}, {600, transient},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.give), func(t *testing.T) {
			if got := Outcome(tt.give, nil); got != tt.want {
				t.Fatalf("Outcome(%d) = %v, want %v", tt.give, got, tt.want)
			}
		})
	}
}

// do sends req and returns only its transport error.
func do(req *http.Request, err error) error {
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if resp != nil {
		resp.Body.Close()
	}
	return err
}

func TestRealNetworkErrorsAreTransient(t *testing.T) {
	// A refused connection: listen, take the address, close.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	refused := do(http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr, nil))

	// A timeout: a receiver that answers after the client gave up.
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	timedOut := do(http.NewRequestWithContext(ctx, http.MethodPost, slow.URL, nil))

	// DNS failure: .invalid never resolves (RFC 2606).
	dns := do(http.NewRequestWithContext(t.Context(), http.MethodGet, "http://hookline-test.invalid/", nil))

	tests := []struct {
		name string
		give error
	}{
		{"connection refused", refused},
		{"timeout", timedOut},
		{"dns", dns},
		{"reset", fmt.Errorf("post: %w", errors.New("connection reset by peer"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.give == nil {
				t.Fatal("expected a real error")
			}
			if got := Outcome(0, tt.give); got != transient {
				t.Fatalf("Outcome(%v) = %v, want transient", tt.give, got)
			}
		})
	}
	if !IsTimeout(timedOut) {
		t.Fatalf("IsTimeout(%v) = false", timedOut)
	}
}

func TestRefusedDestinationIsPermanent(t *testing.T) {
	err := fmt.Errorf("dial 10.0.0.1:443: %w", ErrRefusedDestination)
	if got := Outcome(0, err); got != permanent {
		t.Fatalf("got %v, want permanent", got)
	}
}

func TestRetryable(t *testing.T) {
	for c, want := range map[hooklinev1.OutcomeClass]bool{success: false, transient: true, ambiguous: true, permanent: false} {
		if Retryable(c) != want {
			t.Errorf("Retryable(%v) = %v", c, !want)
		}
	}
}

func TestRefusedCredentialsArePermanent(t *testing.T) {
	err := fmt.Errorf("oauth2 token endpoint answered HTTP 401: %w", ErrCredentialsRefused)
	if got := Outcome(0, err); got != permanent {
		t.Fatalf("got %v, want permanent", got)
	}
}
