package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookline/hookline/platform/badreceiver"
)

// Receiver kinds: each endpoint of a run is one of them.
const (
	kindHealthy = "healthy" // answers 204 at once
	kindSlow    = "slow"    // answers 204 after slowDelay
	kindFlaky   = "flaky"   // answers 503 half the time, 204 otherwise
	kindDead    = "dead"    // a port nothing listens on: connection refused
	kindHanging = "hanging" // accepts the request and never answers
	// kindBad is a misbehaving receiver (platform/badreceiver) that never
	// answers 2xx: endless or huge error bodies, slowloris or huge
	// headers, endless 1xx, garbage, a cut connection, a redirect to an
	// internal address, silence. Each has an endpoint of its own.
	kindBad = "misbehaving"
	// kindOrderedKey and kindOrderedEndpoint receive the ordered
	// traffic (orderedLanes): endpoints ordered per key and one ordered
	// per endpoint. Both answer 503 to one request in four, so lane heads
	// retry while their followers wait.
	kindOrderedKey      = "ordered-key"
	kindOrderedEndpoint = "ordered-endpoint"
)

// badKinds are the misbehaviours of kindBad receivers: the ones that
// never answer 2xx, so every delivery to them must end FAILED (one that
// ended DELIVERED would count as lost: its receiver never took it).
var badKinds = []string{"trickled-body", "10mb-body", "slowloris-headers", "huge-headers", "endless-1xx", "garbage", "close-mid-headers", "hang", "redirect-internal"}

var kinds = []string{kindHealthy, kindSlow, kindFlaky, kindDead, kindHanging, kindOrderedKey, kindOrderedEndpoint}

const slowDelay = 300 * time.Millisecond

// seen is what one receiver saw for one webhook-id.
type seen struct {
	requests int       // every request
	ok       int       // requests answered 2xx
	first    time.Time // first request answered 2xx: when its answer was decided, just before it was written
	// firstStart is when the first request answered 2xx arrived.
	firstStart time.Time
	last       time.Time // when the latest request arrived
	seq        int64     // the body's seq (-1: body not ours)
	kind       string    // the receiver that saw it
	bodyDiff   bool      // a later request carried another body
}

// receivers runs one loopback HTTP server per kind (none for dead) and
// records every request by webhook-id. Safe for concurrent use.
type receivers struct {
	urls map[string]string
	bad  map[string]string // misbehaviour -> url (kindBad)
	srvs []*http.Server
	bads []*badreceiver.Server
	stop chan struct{}

	mu   sync.Mutex
	seen map[string]*seen // by webhook-id
	rng  *rand.Rand
	// relaxed makes the slow receiver answer at once (relax).
	relaxed atomic.Bool
}

// startReceivers starts one receiver per kind, and with bad one per
// misbehaviour of badKinds.
func startReceivers(bad bool) (*receivers, error) {
	r := &receivers{urls: map[string]string{}, bad: map[string]string{}, seen: map[string]*seen{}, stop: make(chan struct{}), rng: rand.New(rand.NewPCG(1, 2))}
	if bad {
		mix := badreceiver.Mix()
		for _, name := range badKinds {
			s, err := badreceiver.Listen(mix[name])
			if err != nil {
				r.close()
				return nil, err
			}
			r.bads = append(r.bads, s)
			r.bad[name] = s.URL("/" + name)
		}
	}
	for _, k := range kinds {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			r.close()
			return nil, err
		}
		r.urls[k] = "http://" + ln.Addr().String() + "/" + k
		if k == kindDead {
			ln.Close() // refused from now on
			continue
		}
		srv := &http.Server{Handler: r.handler(k), ReadHeaderTimeout: 5 * time.Second}
		r.srvs = append(r.srvs, srv)
		go func() { _ = srv.Serve(ln) }()
	}
	return r, nil
}

func (r *receivers) handler(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		arrived := time.Now()
		body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		id := req.Header.Get("webhook-id")
		var p struct {
			Seq *int64 `json:"seq"`
		}
		seq := int64(-1)
		if json.Unmarshal(body, &p) == nil && p.Seq != nil {
			seq = *p.Seq
		}
		status := http.StatusNoContent
		switch kind {
		case kindSlow:
			if r.relaxed.Load() {
				break
			}
			select {
			case <-time.After(slowDelay):
			case <-req.Context().Done():
				return
			case <-r.stop:
				return
			}
		case kindFlaky:
			r.mu.Lock()
			if r.rng.IntN(2) == 0 {
				status = http.StatusServiceUnavailable
			}
			r.mu.Unlock()
		case kindOrderedKey, kindOrderedEndpoint:
			r.mu.Lock()
			if r.rng.IntN(4) == 0 {
				status = http.StatusServiceUnavailable
			}
			r.mu.Unlock()
		case kindHanging:
			r.note(id, kind, seq, false, arrived)
			select {
			case <-req.Context().Done():
			case <-r.stop:
			}
			return
		}
		// Noted before the answer is written: a lane's next member cannot
		// arrive before its predecessor's success is on record.
		r.note(id, kind, seq, status < 300, arrived)
		w.WriteHeader(status)
	}
}

func (r *receivers) note(id, kind string, seq int64, ok bool, arrived time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.seen[id]
	if s == nil {
		s = &seen{seq: seq, kind: kind}
		r.seen[id] = s
	} else if s.seq != seq {
		s.bodyDiff = true
	}
	s.requests++
	s.last = arrived
	if ok {
		s.ok++
		if s.first.IsZero() {
			s.first = time.Now()
			s.firstStart = arrived
		}
	}
}

// snapshot copies what the receivers saw so far.
func (r *receivers) snapshot() map[string]seen {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]seen, len(r.seen))
	for k, v := range r.seen {
		out[k] = *v
	}
	return out
}

// relax makes the slow receiver answer at once from now on: a receiver
// back to full speed, so a backlog built while it was slow drains.
func (r *receivers) relax() { r.relaxed.Store(true) }

func (r *receivers) close() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	for _, s := range r.srvs {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := s.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			_ = s.Close()
		}
		cancel()
	}
	for _, s := range r.bads {
		s.Close()
	}
}
