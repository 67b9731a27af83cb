package console

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
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
	// SessionTTL is how long a sign-in lasts: a session's cookie stops
	// opening this long after it was made.
	SessionTTL = 8 * time.Hour
)

// session is a signed-in caller, as its cookie says and the API key it
// signed in with still allows.
type session struct {
	tenant string
	admin  bool
	csrf   string
	// id names the session (random, made at sign-in) in the audit log
	// and in a sign-out.
	id string
	// expires is when the cookie stops opening.
	expires time.Time
}

// sessions makes and opens session cookies. A session is not server
// state: its cookie is the tenant, the scope, the expiry, the SHA-256 of
// the API key it signed in with and a random session id, sealed with
// AES-256-GCM under a key derived from the console session key
// (--console-session-key-file), so every replica that shares the key
// serves it, a restart ends none, and nobody without the key can read a
// cookie or make one: a hashed keys-file entry, which anyone reading the
// keys file, a ConfigMap or a Helm value has, is not enough, and a leaked
// cookie shows nothing it could be re-minted from. Each request resolves
// the key again by its hash: revoking the key ends its sessions at once,
// and a key's scope lowered lowers theirs. The cookie cannot be altered
// or extended. Signing out revokes the session's id (Revocations), so a
// copy of its cookie is refused from then on, on every replica that
// shares the Revocations.
//
// keys[0] seals; every key opens, so the session key is rotated by
// putting the new one first and dropping the old one a session lifetime
// later.
type sessions struct {
	keys []sessionKey
	now  func() time.Time
}

// sessionKey is one console session key, expanded (HKDF-SHA256) into the
// cookie's AEAD and the CSRF tokens' HMAC key.
type sessionKey struct {
	seal cipher.AEAD
	csrf []byte
}

// sessionAD is the additional data of every sealed cookie: a version,
// so no other use of the key's AEAD opens as a session.
const sessionAD = "hookline console session v2"

func newSessionKey(secret []byte) sessionKey {
	aesKey, err := hkdf.Key(sha256.New, secret, nil, "hookline console session cookie", 32)
	if err != nil {
		panic(err) // only for a length HKDF-SHA256 cannot give
	}
	csrf, err := hkdf.Key(sha256.New, secret, nil, "hookline console csrf", 32)
	if err != nil {
		panic(err)
	}
	block, err := aes.NewCipher(aesKey)
	if err != nil {
		panic(err) // a 32-byte key is always valid
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return sessionKey{seal: aead, csrf: csrf}
}

func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+).
	return hex.EncodeToString(b[:])
}

// sealed layout: expires (unix seconds, 8) | admin (1) | key hash (32) |
// session id (16) | tenant.
const payloadFixed = 8 + 1 + sha256.Size + 16

// create returns the cookie value of a new session and its id.
func (ss *sessions) create(tenant string, admin bool, keySum [sha256.Size]byte) (value, id string) {
	p := binary.BigEndian.AppendUint64(nil, uint64(ss.now().Add(SessionTTL).Unix()))
	if admin {
		p = append(p, 1)
	} else {
		p = append(p, 0)
	}
	p = append(p, keySum[:]...)
	var sid [16]byte
	_, _ = rand.Read(sid[:])
	p = append(append(p, sid[:]...), tenant...)
	k := ss.keys[0]
	nonce := make([]byte, k.seal.NonceSize())
	_, _ = rand.Read(nonce)
	enc := base64.RawURLEncoding
	return enc.EncodeToString(nonce) + "." + enc.EncodeToString(k.seal.Seal(nil, nonce, p, []byte(sessionAD))), hex.EncodeToString(sid[:])
}

// open checks value's seal and expiry, then asks resolve whether the key
// it names still allows the session.
func (ss *sessions) open(value string, resolve func(keySum [sha256.Size]byte) (tenant string, admin, ok bool)) (*session, bool) {
	enc := base64.RawURLEncoding
	ntext, ctext, ok := strings.Cut(value, ".")
	if !ok {
		return nil, false
	}
	nonce, err1 := enc.DecodeString(ntext)
	sealed, err2 := enc.DecodeString(ctext)
	if err1 != nil || err2 != nil {
		return nil, false
	}
	var p []byte
	var key sessionKey
	for _, k := range ss.keys {
		if len(nonce) != k.seal.NonceSize() {
			continue
		}
		if opened, err := k.seal.Open(nil, nonce, sealed, []byte(sessionAD)); err == nil {
			p, key = opened, k
			break
		}
	}
	if len(p) < payloadFixed {
		return nil, false
	}
	expires := time.Unix(int64(binary.BigEndian.Uint64(p)), 0)
	if !ss.now().Before(expires) {
		return nil, false
	}
	admin := p[8] == 1
	var keySum [sha256.Size]byte
	copy(keySum[:], p[9:9+sha256.Size])
	id := hex.EncodeToString(p[9+sha256.Size : payloadFixed])
	tenant := string(p[payloadFixed:])
	nowTenant, nowAdmin, ok := resolve(keySum)
	if !ok || nowTenant != tenant {
		return nil, false // revoked, or no longer this tenant's
	}
	m := hmac.New(sha256.New, key.csrf)
	m.Write([]byte(value))
	return &session{
		tenant: tenant, admin: admin && nowAdmin,
		csrf: hex.EncodeToString(m.Sum(nil)),
		id:   id, expires: expires,
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
		if ok {
			revoked, err := s.revocations.Revoked(r.Context(), sess.id)
			if err != nil {
				s.log.WarnContext(r.Context(), "console: sign-outs not readable", "err", err)
				http.Error(w, "the console cannot check sessions now; try again shortly", http.StatusServiceUnavailable)
				return
			}
			ok = !revoked
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
