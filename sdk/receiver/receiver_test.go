package receiver_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookline/hookline/sdk/receiver"
	"github.com/hookline/hookline/sdk/sign"
)

var (
	oldSecret          = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // base64 of 24 bytes
	newSecret          = sign.GenerateSecret()
	privateKey, pubKey = sign.GenerateKeyPair()
	t0                 = time.Unix(1_800_000_000, 0)
)

// delivery is one POST as Hookline's dispatcher makes it.
func delivery(t *testing.T, id string, at time.Time, body string, secrets ...string) *http.Request {
	t.Helper()
	s, err := sign.NewSigner(secrets...)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/hooks", strings.NewReader(body))
	req.Header.Set(sign.HeaderID, id)
	req.Header.Set(sign.HeaderTimestamp, strconv.FormatInt(at.Unix(), 10))
	req.Header.Set(sign.HeaderSignature, s.Sign(id, at, []byte(body)))
	req.Header.Set("webhook-event-type", "invoice.paid")
	return req
}

// worked collects what the work function was given.
type worked struct {
	mu   sync.Mutex
	evs  []receiver.Event
	done chan string
	fail func(receiver.Event) error
}

func (w *worked) do(_ context.Context, ev receiver.Event) error {
	w.mu.Lock()
	w.evs = append(w.evs, ev)
	w.mu.Unlock()
	var err error
	if w.fail != nil {
		err = w.fail(ev)
	}
	w.done <- ev.ID
	return err
}

func TestReceiverVerifiesDeduplicatesAndHandsOff(t *testing.T) {
	tests := []struct {
		name     string
		secrets  []string // the receiver's
		requests []func(t *testing.T) *http.Request
		want     []int // status per request
		wantWork []string
	}{
		{
			name:     "valid: accepted and worked on",
			secrets:  []string{newSecret},
			requests: []func(*testing.T) *http.Request{func(t *testing.T) *http.Request { return delivery(t, "evt_1", t0, `{"a":1}`, newSecret) }},
			want:     []int{http.StatusAccepted},
			wantWork: []string{"evt_1"},
		},
		{
			name:    "a redelivery of a taken id is answered 2xx and does nothing",
			secrets: []string{newSecret},
			requests: []func(*testing.T) *http.Request{
				func(t *testing.T) *http.Request { return delivery(t, "evt_1", t0, `{"a":1}`, newSecret) },
				func(t *testing.T) *http.Request {
					return delivery(t, "evt_1", t0.Add(time.Second), `{"a":1}`, newSecret)
				},
			},
			want:     []int{http.StatusAccepted, http.StatusOK},
			wantWork: []string{"evt_1"},
		},
		{
			name:    "rotation: Hookline signs with both secrets, the receiver knows only the new one",
			secrets: []string{newSecret},
			requests: []func(*testing.T) *http.Request{
				func(t *testing.T) *http.Request { return delivery(t, "evt_2", t0, `{}`, newSecret, oldSecret) },
			},
			want:     []int{http.StatusAccepted},
			wantWork: []string{"evt_2"},
		},
		{
			name:    "rotation: the receiver knows both, the sender still signs with the old one",
			secrets: []string{newSecret, oldSecret},
			requests: []func(*testing.T) *http.Request{
				func(t *testing.T) *http.Request { return delivery(t, "evt_3", t0, `{}`, oldSecret) },
			},
			want:     []int{http.StatusAccepted},
			wantWork: []string{"evt_3"},
		},
		{
			name:    "v1a: the receiver holds only the public key",
			secrets: []string{pubKey},
			requests: []func(*testing.T) *http.Request{
				func(t *testing.T) *http.Request { return delivery(t, "evt_11", t0, `{}`, privateKey) },
			},
			want:     []int{http.StatusAccepted},
			wantWork: []string{"evt_11"},
		},
		{
			name:    "wrong secret: refused, and the id is not taken",
			secrets: []string{newSecret},
			requests: []func(*testing.T) *http.Request{
				func(t *testing.T) *http.Request { return delivery(t, "evt_4", t0, `{}`, oldSecret) },
				func(t *testing.T) *http.Request { return delivery(t, "evt_4", t0, `{}`, newSecret) },
			},
			want:     []int{http.StatusUnauthorized, http.StatusAccepted},
			wantWork: []string{"evt_4"},
		},
		{
			name:    "tampered body",
			secrets: []string{newSecret},
			requests: []func(*testing.T) *http.Request{func(t *testing.T) *http.Request {
				r := delivery(t, "evt_5", t0, `{"amount":1}`, newSecret)
				r.Body = httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"amount":9}`)).Body
				return r
			}},
			want: []int{http.StatusUnauthorized},
		},
		{
			name:    "outside the tolerance window, either side",
			secrets: []string{newSecret},
			requests: []func(*testing.T) *http.Request{
				func(t *testing.T) *http.Request { return delivery(t, "evt_6", t0.Add(-6*time.Minute), `{}`, newSecret) },
				func(t *testing.T) *http.Request { return delivery(t, "evt_7", t0.Add(6*time.Minute), `{}`, newSecret) },
				func(t *testing.T) *http.Request { return delivery(t, "evt_8", t0.Add(-4*time.Minute), `{}`, newSecret) },
			},
			want:     []int{http.StatusUnauthorized, http.StatusUnauthorized, http.StatusAccepted},
			wantWork: []string{"evt_8"},
		},
		{
			name:    "missing headers",
			secrets: []string{newSecret},
			requests: []func(*testing.T) *http.Request{func(t *testing.T) *http.Request {
				r := delivery(t, "evt_9", t0, `{}`, newSecret)
				r.Header.Del(sign.HeaderSignature)
				return r
			}},
			want: []int{http.StatusBadRequest},
		},
		{
			name:    "not a POST",
			secrets: []string{newSecret},
			requests: []func(*testing.T) *http.Request{func(t *testing.T) *http.Request {
				return httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/hooks", nil)
			}},
			want: []int{http.StatusMethodNotAllowed},
		},
		{
			name:    "body over the limit",
			secrets: []string{newSecret},
			requests: []func(*testing.T) *http.Request{func(t *testing.T) *http.Request {
				return delivery(t, "evt_10", t0, `"`+strings.Repeat("x", 2<<20)+`"`, newSecret)
			}},
			want: []int{http.StatusRequestEntityTooLarge},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &worked{done: make(chan string, 10)}
			rx, err := receiver.New(w.do, tt.secrets, receiver.WithClock(func() time.Time { return t0 }))
			if err != nil {
				t.Fatal(err)
			}
			ctx, stop := context.WithCancel(t.Context())
			ran := make(chan error)
			go func() { ran <- rx.Run(ctx) }()
			for i, mk := range tt.requests {
				rec := httptest.NewRecorder()
				rx.ServeHTTP(rec, mk(t))
				if rec.Code != tt.want[i] {
					t.Fatalf("request %d: status %d (%s), want %d", i+1, rec.Code, rec.Body, tt.want[i])
				}
			}
			stop()
			if err := <-ran; err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ev := range w.evs {
				got = append(got, ev.ID)
				if ev.Type != "invoice.paid" || ev.Timestamp.IsZero() || len(ev.Body) == 0 {
					t.Errorf("event %+v lacks its type, time or body", ev)
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.wantWork, ",") {
				t.Fatalf("worked on %v, want %v", got, tt.wantWork)
			}
		})
	}
}

// releases is a MemoryStore that reports each Release.
type releases struct {
	*receiver.MemoryStore
	released chan string
}

func (r releases) Release(ctx context.Context, id string) error {
	err := r.MemoryStore.Release(ctx, id)
	r.released <- id
	return err
}

func TestFailedWorkReleasesTheIDForARedelivery(t *testing.T) {
	w := &worked{done: make(chan string, 10), fail: func(receiver.Event) error { return errors.New("database down") }}
	store := releases{receiver.NewMemoryStore(0, 0, nil), make(chan string, 10)}
	rx, err := receiver.New(w.do, []string{newSecret}, receiver.WithClock(func() time.Time { return t0 }), receiver.WithStore(store))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = rx.Run(t.Context()) }()
	for i := range 2 {
		rec := httptest.NewRecorder()
		rx.ServeHTTP(rec, delivery(t, "evt_1", t0, `{}`, newSecret))
		if rec.Code != http.StatusAccepted {
			t.Fatalf("delivery %d: status %d, want 202 (a failed try releases the id)", i+1, rec.Code)
		}
		if id := <-store.released; id != "evt_1" {
			t.Fatalf("released %q", id)
		}
	}
	if len(w.evs) != 2 {
		t.Fatalf("worked %d times, want 2", len(w.evs))
	}
}

func TestFullQueueAnswers503AndKeepsTheIDFree(t *testing.T) {
	block := make(chan struct{})
	started := make(chan struct{}, 1)
	rx, err := receiver.New(func(ctx context.Context, ev receiver.Event) error {
		started <- struct{}{}
		<-block
		return nil
	}, []string{newSecret}, receiver.WithClock(func() time.Time { return t0 }), receiver.WithWorkers(1), receiver.WithQueue(1))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	ran := make(chan error)
	go func() { ran <- rx.Run(ctx) }()
	status := func(id string) int {
		rec := httptest.NewRecorder()
		rx.ServeHTTP(rec, delivery(t, id, t0, `{}`, newSecret))
		return rec.Code
	}
	if c := status("evt_1"); c != http.StatusAccepted {
		t.Fatalf("evt_1: %d", c)
	}
	<-started // the worker holds evt_1
	if c := status("evt_2"); c != http.StatusAccepted {
		t.Fatalf("evt_2 (queued): %d", c)
	}
	if c := status("evt_3"); c != http.StatusServiceUnavailable {
		t.Fatalf("evt_3 with the queue full: %d, want 503", c)
	}
	close(block)
	<-started // evt_2 taken from the queue
	if c := status("evt_3"); c != http.StatusAccepted {
		t.Fatalf("evt_3 redelivered: %d, want 202 (its id was released)", c)
	}
	stop()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if c := status("evt_4"); c != http.StatusServiceUnavailable {
		t.Fatalf("after Run: %d, want 503", c)
	}
}

func TestMemoryStoreForgetsByAgeAndCapacity(t *testing.T) {
	now := t0
	s := receiver.NewMemoryStore(time.Hour, 2, func() time.Time { return now })
	claim := func(id string) bool {
		ok, err := s.Claim(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !claim("a") || claim("a") {
		t.Fatal("a: first claim must win, the second lose")
	}
	now = now.Add(30 * time.Minute)
	if !claim("b") || !claim("c") { // c evicts a (capacity 2)
		t.Fatal("b, c")
	}
	if !claim("a") {
		t.Fatal("a was evicted by capacity: claimable again")
	}
	now = now.Add(time.Hour) // c and a, claimed an hour ago, expired
	if !claim("c") || s.Len() != 1 {
		t.Fatalf("c expired: claimable again, alone in the store; len %d", s.Len())
	}
}
