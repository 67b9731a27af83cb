// Package receiver is the receiving end of Hookline's webhooks (SPEC
// R-RX) as an http.Handler: it verifies the Standard Webhooks signature
// (v1 HMAC or v1a ed25519; tolerance window; several secrets during a
// rotation), records the
// webhook-id in a Store, answers 2xx at once and hands the work to its
// own workers. A duplicate (an id already taken) is answered 2xx and does
// nothing: a 409 or 500 would only make Hookline spend an attempt.
//
//	rx, err := receiver.New(func(ctx context.Context, ev receiver.Event) error {
//		return process(ctx, ev.Type, ev.Body)
//	}, []string{os.Getenv("WEBHOOK_SECRET")})
//	go rx.Run(ctx)
//	http.Handle("/webhooks", rx)
//
// A batch (a request with the webhook-batch-size header; package
// sdk/batch) is verified over its whole body like any webhook, then each
// member is deduplicated and handed to the work function as its own
// Event (ID the member's event id), as if it had come alone; the
// request is answered 2xx once every member is taken or a duplicate.
//
// The hand-off is in memory: work acknowledged but not yet done is lost
// if the process dies. When that matters, let the work function write the
// event somewhere durable (a queue, a table) and do the rest from there.
package receiver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookline/hookline/sdk/batch"
	"github.com/hookline/hookline/sdk/sign"
)

// Event is one verified, first-seen webhook.
type Event struct {
	// ID is the webhook-id: Hookline's event id, the same on every
	// attempt and every endpoint. Of a batch's member: the member's id.
	ID string
	// Type is the webhook-event-type header, e.g. "invoice.paid"; of a
	// batch's member, the member's type.
	Type string
	// Timestamp is the attempt's webhook-timestamp; of a batch's
	// member, when the event was published.
	Timestamp time.Time
	// Body is the request's body; of a batch's member, its payload.
	Body   []byte
	Header http.Header
	// BatchID is the webhook-id of the batch the event came in ("bat_…"),
	// empty when it came alone.
	BatchID string
}

// Func does the work of one event, after the request was answered. An
// error (or a panic) releases the event's id, so a later redelivery of it
// (a resend, a recover) is processed again.
type Func func(ctx context.Context, ev Event) error

// Receiver is an http.Handler for webhooks; Run its workers. It is safe
// for concurrent use.
type Receiver struct {
	work      Func
	signer    atomic.Pointer[sign.Signer]
	store     Store
	tolerance time.Duration
	maxBody   int64
	workers   int
	now       func() time.Time
	log       *slog.Logger

	// mu guards stopped against the enqueue in ServeHTTP, so nothing is
	// queued after Run has drained the queue.
	mu      sync.RWMutex
	stopped bool
	queue   chan Event
}

// Option configures a Receiver.
type Option func(*Receiver)

// WithStore sets where taken ids are kept (default a MemoryStore with
// DefaultTTL and DefaultCapacity).
func WithStore(s Store) Option { return func(r *Receiver) { r.store = s } }

// WithTolerance sets how far webhook-timestamp may be from now (default
// 5 minutes, sign.DefaultTolerance): older deliveries are refused, which
// bounds replays.
func WithTolerance(d time.Duration) Option { return func(r *Receiver) { r.tolerance = d } }

// WithMaxBody sets the largest body accepted (default 1 MiB + 64 KiB);
// larger ones are answered 413. An endpoint batching with max_bytes over
// 1 MiB needs at least that.
func WithMaxBody(n int64) Option { return func(r *Receiver) { r.maxBody = n } }

// WithWorkers sets how many events are worked on at once (default 4).
func WithWorkers(n int) Option { return func(r *Receiver) { r.workers = n } }

// WithQueue sets how many accepted events may wait for a worker (default
// 256); while it is full, deliveries are answered 503 and Hookline
// retries them.
func WithQueue(n int) Option { return func(r *Receiver) { r.queue = make(chan Event, n) } }

// WithClock injects the clock the tolerance is checked with (default
// time.Now).
func WithClock(now func() time.Time) Option { return func(r *Receiver) { r.now = now } }

// WithLogger sets where refusals and failed work are logged (default
// slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(r *Receiver) { r.log = l } }

// New returns a Receiver that verifies with secrets ("whsec_…" HMAC
// secrets for v1 signatures, "whpk_…" public keys for v1a; during a
// rotation give both the new and the old one) and runs work for each new
// event.
func New(work Func, secrets []string, opts ...Option) (*Receiver, error) {
	r := &Receiver{
		work:      work,
		tolerance: sign.DefaultTolerance,
		maxBody:   1<<20 + 64<<10,
		workers:   4,
		now:       time.Now,
		log:       slog.Default(),
		queue:     make(chan Event, 256),
	}
	for _, o := range opts {
		o(r)
	}
	if r.store == nil {
		r.store = NewMemoryStore(0, 0, r.now)
	}
	if err := r.SetSecrets(secrets...); err != nil {
		return nil, err
	}
	if r.workers < 1 {
		return nil, errors.New("receiver: at least one worker is required")
	}
	return r, nil
}

// SetSecrets replaces the secrets signatures are checked against, e.g.
// to add the new one when Hookline rotates an endpoint's secret and drop
// the old one after the grace period.
func (r *Receiver) SetSecrets(secrets ...string) error {
	s, err := sign.NewVerifier(secrets...)
	if err != nil {
		return fmt.Errorf("receiver: %w", err)
	}
	r.signer.Store(s)
	return nil
}

// ServeHTTP verifies, deduplicates and queues one webhook, or each
// member of a batch: 202 accepted, 200 duplicate (nothing done; of a
// batch, every member), 400 or 401 not a valid signed webhook (or
// batch), 413 too large, 503 busy or the store failed (Hookline retries
// those; a batch's members queued before it stay taken, and the retry
// finds them duplicates).
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "webhooks are POSTed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, r.maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, fmt.Sprintf("body over %d bytes", r.maxBody), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "reading the body failed", http.StatusBadRequest)
		return
	}
	id := req.Header.Get(sign.HeaderID)
	ts := req.Header.Get(sign.HeaderTimestamp)
	if err := r.signer.Load().Verify(id, ts, req.Header.Get(sign.HeaderSignature), body, r.now(), r.tolerance); err != nil {
		code := http.StatusUnauthorized
		if errors.Is(err, sign.ErrMissingHeaders) || errors.Is(err, sign.ErrBadTimestamp) {
			code = http.StatusBadRequest
		}
		r.log.WarnContext(req.Context(), "receiver: webhook refused", "webhook_id", id, "err", err)
		http.Error(w, err.Error(), code)
		return
	}
	var evs []Event
	if size := req.Header.Get(batch.HeaderSize); size != "" {
		if evs, err = members(id, size, body, req.Header); err != nil {
			r.log.WarnContext(req.Context(), "receiver: batch refused", "webhook_id", id, "err", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	} else {
		sec, _ := strconv.ParseInt(ts, 10, 64) // Verify parsed it
		evs = []Event{{ID: id, Type: req.Header.Get("webhook-event-type"), Timestamp: time.Unix(sec, 0), Body: body, Header: req.Header.Clone()}}
	}
	accepted := false
	for _, ev := range evs {
		code, msg := r.take(req.Context(), ev)
		switch code {
		case http.StatusOK: // a duplicate: done already
			continue
		case http.StatusAccepted:
			accepted = true
			continue
		case http.StatusServiceUnavailable:
			w.Header().Set("Retry-After", "1")
		}
		http.Error(w, msg, code)
		return
	}
	if !accepted {
		w.WriteHeader(http.StatusOK)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// take claims ev's id and queues ev: 202 queued, 200 a duplicate, 503
// (with what to say) when the store failed or the queue is full; then
// the id is free again.
func (r *Receiver) take(ctx context.Context, ev Event) (int, string) {
	first, err := r.store.Claim(ctx, ev.ID)
	if err != nil {
		r.log.ErrorContext(ctx, "receiver: store failed; asking for a redelivery", "webhook_id", ev.ID, "err", err)
		return http.StatusServiceUnavailable, "try again later"
	}
	if !first {
		return http.StatusOK, ""
	}
	if !r.enqueue(ev) {
		if err := r.store.Release(ctx, ev.ID); err != nil {
			r.log.ErrorContext(ctx, "receiver: release failed", "webhook_id", ev.ID, "err", err)
		}
		return http.StatusServiceUnavailable, "busy, try again later"
	}
	return http.StatusAccepted, ""
}

// members returns the events of a verified batch body whose
// webhook-batch-size header says size, in the body's order.
func members(batchID, size string, body []byte, h http.Header) ([]Event, error) {
	n, err := strconv.Atoi(size)
	if err != nil || n < 1 {
		return nil, fmt.Errorf("%s %q is not a member count", batch.HeaderSize, size)
	}
	ms, err := batch.Decode(body)
	if err != nil {
		return nil, err
	}
	if len(ms) != n {
		return nil, fmt.Errorf("%s says %d members, the body lists %d", batch.HeaderSize, n, len(ms))
	}
	evs := make([]Event, len(ms))
	for i, m := range ms {
		evs[i] = Event{ID: m.ID, Type: m.Type, Timestamp: m.Timestamp, Body: m.Payload, Header: h.Clone(), BatchID: batchID}
	}
	return evs, nil
}

// enqueue hands ev to the workers unless the queue is full or Run has
// stopped.
func (r *Receiver) enqueue(ev Event) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.stopped {
		return false
	}
	select {
	case r.queue <- ev:
		return true
	default:
		return false
	}
}

// Run works on accepted events until ctx ends, then stops accepting (503)
// and finishes the events already accepted before it returns; their work
// gets a context that is not canceled. Run once.
func (r *Receiver) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for range r.workers {
		wg.Go(func() {
			for {
				select {
				case ev := <-r.queue:
					r.do(ctx, ev)
				case <-ctx.Done():
					return
				}
			}
		})
	}
	<-ctx.Done()
	wg.Wait()
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	drain := context.WithoutCancel(ctx)
	for {
		select {
		case ev := <-r.queue:
			r.do(drain, ev)
		default:
			return nil
		}
	}
}

// do runs the work of one event; a failure releases its id.
func (r *Receiver) do(ctx context.Context, ev Event) {
	err := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("panic: %v", p)
			}
		}()
		return r.work(ctx, ev)
	}()
	if err == nil {
		return
	}
	r.log.ErrorContext(ctx, "receiver: work failed; its id is released for a redelivery", "webhook_id", ev.ID, "err", err)
	if rerr := r.store.Release(context.WithoutCancel(ctx), ev.ID); rerr != nil {
		r.log.ErrorContext(ctx, "receiver: release failed", "webhook_id", ev.ID, "err", rerr)
	}
}
