package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"sync"
	"time"

	"github.com/hookline/hookline/services/ingest/apikey"
)

const (
	cookieName = "hookline_console"
	// sessionTTL is how long a sign-in lasts.
	sessionTTL = 8 * time.Hour
	// maxSessions bounds the sessions one replica holds; the oldest
	// expiring goes first.
	maxSessions = 10000
)

type session struct {
	tenant  string
	admin   bool
	csrf    string
	expires time.Time
	flash   string // shown once, by the next page; guarded by sessions.mu
}

// sessions is the in-memory session table. Safe for concurrent use.
type sessions struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[string]*session
}

func newSessions(now func() time.Time) *sessions {
	return &sessions{now: now, m: map[string]*session{}}
}

func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+).
	return hex.EncodeToString(b[:])
}

// create starts a session and returns its id.
func (ss *sessions) create(tenant string, admin bool) string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	now := ss.now()
	if len(ss.m) >= maxSessions {
		var oldest string
		for id, s := range ss.m {
			if !now.Before(s.expires) {
				delete(ss.m, id)
			} else if oldest == "" || s.expires.Before(ss.m[oldest].expires) {
				oldest = id
			}
		}
		if len(ss.m) >= maxSessions {
			delete(ss.m, oldest)
		}
	}
	id := randomToken()
	ss.m[id] = &session{tenant: tenant, admin: admin, csrf: randomToken(), expires: now.Add(sessionTTL)}
	return id
}

func (ss *sessions) get(id string) (*session, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.m[id]
	if !ok {
		return nil, false
	}
	if !ss.now().Before(s.expires) {
		delete(ss.m, id)
		return nil, false
	}
	return s, true
}

// setFlash keeps msg for the session's next page.
func (ss *sessions) setFlash(s *session, msg string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s.flash = msg
}

// takeFlash returns and forgets the session's message (s may be nil).
func (ss *sessions) takeFlash(s *session) string {
	if s == nil {
		return ""
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	msg := s.flash
	s.flash = ""
	return msg
}

func (ss *sessions) end(id string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.m, id)
}

func (s *Server) setCookie(w http.ResponseWriter, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.tls,
	})
}

type ctxSession struct{}

// authed serves h to a signed-in caller (others go to sign-in), with the
// tenant in the request's context. A POST (mutating) must carry the
// session's CSRF token.
func (s *Server) authed(h http.HandlerFunc, post bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie(cookieName)
		var sess *session
		ok := err == nil
		if ok {
			sess, ok = s.sessions.get(c.Value)
		}
		if !ok {
			if post {
				http.Error(w, "sign in first", http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		if post && subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(sess.csrf)) != 1 {
			http.Error(w, "missing or wrong CSRF token: reload the page and try again", http.StatusForbidden)
			return
		}
		scope := apikey.ScopeRead
		if sess.admin {
			scope = apikey.ScopeAdmin
		}
		ctx := apikey.WithPrincipal(r.Context(), apikey.Principal{Tenant: sess.tenant, Scope: scope})
		h(w, r.WithContext(context.WithValue(ctx, ctxSession{}, sess)))
	})
}

func sessionFrom(r *http.Request) *session {
	s, _ := r.Context().Value(ctxSession{}).(*session)
	return s
}
