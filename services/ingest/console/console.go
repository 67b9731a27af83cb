// Package console is ingest's delivery console: a read-only web page,
// rendered on the server with html/template (no front-end build), where
// a person signs in with an API key and sees their tenant's endpoints
// with their health, the delivery log with filters, and each delivery's
// timeline, with resend and recover actions for admin keys.
//
// A session is a sealed, expiring cookie (session.go), served by any
// replica that shares the session key; the cookie is HttpOnly,
// SameSite=Strict, and Secure when served over TLS. Every POST but
// sign-in carries the session's CSRF token.
package console

import (
	"context"
	"crypto/sha256"
	"embed"
	"html/template"
	"log/slog"
	"net/http"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
)

//go:embed templates/*.html
var templateFS embed.FS

// Backend is what the console reads and does, each call scoped to the
// principal the context carries (apikey.WithPrincipal).
type Backend interface {
	// SignIn returns the tenant of an API key and whether the key may
	// act (resend, recover: admin scope); ok is false for an unknown key
	// or one that may not read.
	SignIn(key string) (tenant string, admin, ok bool)
	// SignedIn is SignIn for the key whose SHA-256 is keySum: a session
	// holds only that, and asks again on every request.
	SignedIn(keySum [sha256.Size]byte) (tenant string, admin, ok bool)
	Endpoints(ctx context.Context) ([]EndpointHealth, error)
	ListDeliveries(ctx context.Context, req *hooklinev1.ListDeliveriesRequest) (*hooklinev1.ListDeliveriesResponse, error)
	GetDelivery(ctx context.Context, id string) (*hooklinev1.GetDeliveryResponse, error)
	// Event is the event with its payload.
	Event(ctx context.Context, id string) (*hooklinev1.GetEventResponse, error)
	Resend(ctx context.Context, id string) (attempt uint32, err error)
	// Recover redelivers the endpoint's deliveries that failed since.
	Recover(ctx context.Context, endpointID string, since time.Time) (total, unavailable int, err error)
	// URLNote says what is wrong with an accepted endpoint URL that may
	// still come right (its host does not resolve now), or "".
	URLNote(ctx context.Context, url string) string
}

// Health is an endpoint's health as the console shows it.
type Health string

// The health an endpoint can be in.
const (
	HealthActive  Health = "active"
	HealthFailing Health = "failing"
	HealthOutage  Health = "outage mode"
	HealthPaused  Health = "paused"
)

// EndpointHealth is one endpoint with its health.
type EndpointHealth struct {
	Endpoint *hooklinev1.Endpoint
	Health   Health
	// Why, in a few words ("last 5 deliveries failed").
	Detail string
	// Note is Backend.URLNote's, on the endpoints page only.
	Note string
}

// Server serves the console. It is safe for concurrent use.
type Server struct {
	backend  Backend
	log      *slog.Logger
	now      func() time.Time
	tls      bool
	sessions *sessions
	pages    map[string]*template.Template
	// revocations holds signed-out sessions; throttle counts failed
	// sign-ins.
	revocations Revocations
	throttle    *throttle
}

// Option configures a Server.
type Option func(*Server)

// WithClock injects the clock (default time.Now).
func WithClock(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// WithSessionKeys sets the keys session cookies are sealed with: the
// first seals, each opens (default: one random key, so only this Server
// accepts its sessions). Replicas that share them serve each other's
// sessions. Each should hold at least 32 random bytes.
func WithSessionKeys(keys ...[]byte) Option {
	return func(s *Server) {
		s.sessions.keys = nil
		for _, k := range keys {
			s.sessions.keys = append(s.sessions.keys, newSessionKey(k))
		}
	}
}

// WithRevocations sets where signed-out sessions are recorded and
// checked (default: this Server's memory, so a sign-out is known to this
// Server only). Replicas that serve each other's sessions need one
// shared Revocations.
func WithRevocations(r Revocations) Option { return func(s *Server) { s.revocations = r } }

// WithTLS marks the console as served over TLS: its cookie is Secure.
func WithTLS() Option { return func(s *Server) { s.tls = true } }

// New returns a console over backend.
func New(backend Backend, opts ...Option) *Server {
	s := &Server{backend: backend, log: slog.Default(), now: time.Now, sessions: &sessions{}}
	for _, o := range opts {
		o(s)
	}
	s.sessions.now = s.now
	if s.revocations == nil {
		s.revocations = &memRevocations{now: s.now, ids: map[string]time.Time{}}
	}
	s.throttle = newThrottle()
	if len(s.sessions.keys) == 0 {
		s.sessions.keys = []sessionKey{newSessionKey([]byte(randomToken()))}
	}
	s.pages = parsePages()
	return s
}

// Handler returns the console's HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", s.loginPage)
	mux.HandleFunc("POST /login", s.login)
	mux.Handle("POST /logout", s.authed(s.logout, true))
	mux.Handle("GET /{$}", s.authed(s.endpointsPage, false))
	mux.Handle("GET /deliveries", s.authed(s.deliveriesPage, false))
	mux.Handle("GET /deliveries/{id}", s.authed(s.deliveryPage, false))
	mux.Handle("POST /deliveries/{id}/resend", s.authed(s.resend, true))
	mux.Handle("POST /endpoints/{id}/recover", s.authed(s.recoverEndpoint, true))
	// Cross-origin POSTs (by Sec-Fetch-Site or Origin) are refused before
	// any handler, sign-in included; actions check the CSRF token too.
	return securityHeaders(http.NewCrossOriginProtection().Handler(mux))
}

// securityHeaders forbids framing, sniffing, and anything not from this
// origin; the pages use no script at all.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'self' 'unsafe-inline'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "same-origin")
		w.Header().Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}
