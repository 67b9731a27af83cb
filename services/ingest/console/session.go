package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hookline/hookline/services/ingest/apikey"
)

const (
	cookieName = "hookline_console"
	flashName  = "hookline_console_flash"
	// sessionTTL is how long a sign-in lasts.
	sessionTTL = 8 * time.Hour
)

// session is a signed-in caller, as its cookie says and the API key it
// signed in with still allows.
type session struct {
	tenant string
	admin  bool
	csrf   string
}

// sessions makes and checks session cookies. A session is not server
// state: its cookie is the tenant, the scope, the expiry and the SHA-256
// of the API key it signed in with, signed with HMAC-SHA256, so every
// replica that shares the key (the page-token key) serves it, and a
// restart ends none. Each request resolves the key again by its hash:
// revoking the key ends its sessions at once, and a key's scope lowered
// lowers theirs. The cookie cannot be altered or extended; sign-out
// clears it from the browser (it stays valid until it expires or its key
// is revoked, like a bearer token).
type sessions struct {
	key []byte
	now func() time.Time
}

func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+).
	return hex.EncodeToString(b[:])
}

// payload layout: expires (unix seconds, 8) | admin (1) | key hash (32) |
// nonce (16) | tenant.
const payloadFixed = 8 + 1 + sha256.Size + 16

func (ss *sessions) mac(label string, b []byte) []byte {
	m := hmac.New(sha256.New, ss.key)
	m.Write([]byte(label))
	m.Write(b)
	return m.Sum(nil)
}

// create returns the cookie value of a new session.
func (ss *sessions) create(tenant string, admin bool, keySum [sha256.Size]byte) string {
	p := binary.BigEndian.AppendUint64(nil, uint64(ss.now().Add(sessionTTL).Unix()))
	if admin {
		p = append(p, 1)
	} else {
		p = append(p, 0)
	}
	p = append(p, keySum[:]...)
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	p = append(append(p, nonce[:]...), tenant...)
	enc := base64.RawURLEncoding
	return enc.EncodeToString(p) + "." + enc.EncodeToString(ss.mac("hookline console session\x00", p))
}

// open checks value's signature and expiry, then asks resolve whether
// the key it names still allows the session.
func (ss *sessions) open(value string, resolve func(keySum [sha256.Size]byte) (tenant string, admin, ok bool)) (*session, bool) {
	enc := base64.RawURLEncoding
	ptext, stext, ok := strings.Cut(value, ".")
	if !ok {
		return nil, false
	}
	p, err1 := enc.DecodeString(ptext)
	sig, err2 := enc.DecodeString(stext)
	if err1 != nil || err2 != nil || len(p) < payloadFixed || !hmac.Equal(sig, ss.mac("hookline console session\x00", p)) {
		return nil, false
	}
	if expires := time.Unix(int64(binary.BigEndian.Uint64(p)), 0); !ss.now().Before(expires) {
		return nil, false
	}
	admin := p[8] == 1
	var keySum [sha256.Size]byte
	copy(keySum[:], p[9:9+sha256.Size])
	tenant := string(p[payloadFixed:])
	nowTenant, nowAdmin, ok := resolve(keySum)
	if !ok || nowTenant != tenant {
		return nil, false // revoked, or no longer this tenant's
	}
	return &session{
		tenant: tenant, admin: admin && nowAdmin,
		csrf: hex.EncodeToString(ss.mac("hookline console csrf\x00", []byte(value))),
	}, true
}

func (s *Server) setCookie(w http.ResponseWriter, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.tls,
	})
}

// setFlash keeps msg for the next page (a cookie: any replica shows it).
func (s *Server) setFlash(w http.ResponseWriter, msg string) {
	s.setCookie(w, flashName, url.QueryEscape(msg), 60)
}

// takeFlash returns and clears the message a redirect left.
func (s *Server) takeFlash(w http.ResponseWriter, r *http.Request) string {
	c, err := r.Cookie(flashName)
	if err != nil {
		return ""
	}
	s.setCookie(w, flashName, "", -1)
	msg, _ := url.QueryUnescape(c.Value)
	return msg
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
			sess, ok = s.sessions.open(c.Value, s.backend.SignedIn)
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
