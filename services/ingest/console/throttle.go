package console

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Sign-in throttling: each client (by address) may fail to sign in
// signInBurst times at once, then once every signInEvery; all clients
// together signInGlobalBurst times, then signInGlobalRate a second.
// Past either, a sign-in is answered 429 before its key is looked at,
// so a right key tells a guesser nothing. A successful sign-in costs
// nothing. The counts are per replica.
const (
	signInBurst       = 10
	signInEvery       = 6 * time.Second
	signInGlobalBurst = 100
	signInGlobalRate  = 10
	// throttleClients is how many clients are remembered before the
	// fully rested ones are forgotten.
	throttleClients = 4096
)

// throttle counts failed sign-ins. It is safe for concurrent use.
type throttle struct {
	mu      sync.Mutex
	global  *rate.Limiter
	clients map[string]*rate.Limiter
}

func newThrottle() *throttle {
	return &throttle{global: rate.NewLimiter(signInGlobalRate, signInGlobalBurst), clients: map[string]*rate.Limiter{}}
}

// clientOf is the address a sign-in is counted against.
func clientOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// wait returns how long client must wait before it may try to sign in
// at now; 0: it may.
func (t *throttle) wait(client string, now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var d time.Duration
	for _, l := range []*rate.Limiter{t.clients[client], t.global} {
		if l == nil {
			continue
		}
		if tokens := l.TokensAt(now); tokens < 1 {
			d = max(d, time.Duration((1-tokens)/float64(l.Limit())*float64(time.Second)))
		}
	}
	return d
}

// failed counts a failed sign-in by client at now.
func (t *throttle) failed(client string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.clients[client]
	if l == nil {
		if len(t.clients) >= throttleClients {
			for c, cl := range t.clients {
				if cl.TokensAt(now) >= signInBurst {
					delete(t.clients, c)
				}
			}
		}
		l = rate.NewLimiter(rate.Every(signInEvery), signInBurst)
		t.clients[client] = l
	}
	l.AllowN(now, 1)
	t.global.AllowN(now, 1)
}

// retryAfter is d as a Retry-After value: whole seconds, at least 1.
func retryAfter(d time.Duration) string {
	return strconv.Itoa(int(math.Max(1, math.Ceil(d.Seconds()))))
}
