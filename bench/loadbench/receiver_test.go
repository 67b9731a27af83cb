package main

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// post sends one delivery-like request and returns the status code.
func post(t *testing.T, url, id string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("webhook-id", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestReceiverCountsDistinctDeliveriesOnce(t *testing.T) {
	r, err := newReceiver()
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	url := r.handle("/ep/1", route{group: "g"})
	for _, id := range []string{"evt_1", "evt_2", "evt_1"} {
		if code := post(t, url, id); code != http.StatusNoContent {
			t.Fatalf("status %d, want 204", code)
		}
	}
	answers, unique, failed := r.counts("g")
	if answers != 3 || unique != 2 || failed != 0 {
		t.Errorf("counts = %d answers, %d unique, %d failed; want 3, 2, 0", answers, unique, failed)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := r.waitUnique(ctx, "g", 2); err != nil {
		t.Errorf("waitUnique(2) = %v, want nil", err)
	}
}

func TestReceiverFailsUntilRecoveryThenAccepts(t *testing.T) {
	r, err := newReceiver()
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	url := r.handle("/storm", route{group: "s", kind: answerFailUntil})
	r.recoverAt.Store(time.Now().Add(time.Hour).UnixNano())
	if code := post(t, url, "evt_1"); code != http.StatusServiceUnavailable {
		t.Fatalf("before recovery: status %d, want 503", code)
	}
	r.recoverAt.Store(time.Now().UnixNano())
	if code := post(t, url, "evt_1"); code != http.StatusNoContent {
		t.Fatalf("after recovery: status %d, want 204", code)
	}
	if _, unique, failed := r.counts("s"); unique != 1 || failed != 1 {
		t.Errorf("unique %d, failed %d; want 1, 1", unique, failed)
	}
}

func TestWaitUniqueEndsAtItsDeadline(t *testing.T) {
	r, err := newReceiver()
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := r.waitUnique(ctx, "nobody", 1); !errors.Is(err, errTimeout) {
		t.Errorf("waitUnique = %v, want errTimeout", err)
	}
}
