package attempt

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/hookline/hookline/platform/classify"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// OAuth2 is an endpoint's OAuth 2.0 client credentials grant.
type OAuth2 struct {
	TokenURL, ClientID, ClientSecret string
	Scopes                           []string
	// Audience, if set, is sent as the token request's "audience".
	Audience string
}

// Token refresh: a token is used until refreshMargin before it expires,
// or a tenth of its lifetime when that is shorter.
const refreshMargin = 30 * time.Second

// tokenSource fetches an endpoint's OAuth2 tokens and shares each
// between the endpoint's attempts until shortly before it expires: one
// fetch at a time, the attempts that need a token meanwhile wait for it.
// Tokens never leave it but as the Authorization header of an attempt.
// Safe for concurrent use.
type tokenSource struct {
	cfg clientcredentials.Config
	// hc fetches tokens: the tenant's guarded client (the token URL's
	// address passes the SSRF guard at dial time, like a receiver's).
	hc  *http.Client
	now func() time.Time
	// fetching is held by the one fetch in progress (a lock a waiter
	// can give up on when its attempt ends).
	fetching chan struct{}
	mu       sync.Mutex
	cur      token
}

// token is a fetched token as attempts send it.
type token struct {
	// header is the Authorization header's value; nil before the first
	// fetch.
	header []string
	// refreshAt is when the token stops being used (zero: never, until
	// a receiver refuses it).
	refreshAt time.Time
	// gen counts fetches: a 401 names the token it was answered to.
	gen uint64
}

func newTokenSource(o *OAuth2, hc *http.Client, now func() time.Time) *tokenSource {
	cfg := clientcredentials.Config{
		ClientID: o.ClientID, ClientSecret: o.ClientSecret, TokenURL: o.TokenURL, Scopes: o.Scopes,
		// RFC 6749 2.3.1: every authorization server supports basic.
		AuthStyle: oauth2.AuthStyleInHeader,
	}
	if o.Audience != "" {
		cfg.EndpointParams = url.Values{"audience": {o.Audience}}
	}
	return &tokenSource{cfg: cfg, hc: hc, now: now, fetching: make(chan struct{}, 1)}
}

// token returns the token to send, and whether it was fetched by this
// call. stale, when not zero, is the generation of a token a receiver
// refused: a token of that generation is not returned.
func (ts *tokenSource) token(ctx context.Context, stale uint64) (token, bool, error) {
	if t, ok := ts.cached(stale); ok {
		return t, false, nil
	}
	select {
	case ts.fetching <- struct{}{}:
	case <-ctx.Done():
		return token{}, false, ctx.Err()
	}
	defer func() { <-ts.fetching }()
	// Fetched by another attempt while this one waited?
	if t, ok := ts.cached(stale); ok {
		return t, false, nil
	}
	fetched := ts.now()
	tok, err := ts.cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, ts.hc))
	if err != nil {
		return token{}, false, tokenError(err)
	}
	t := token{header: []string{tok.Type() + " " + tok.AccessToken}}
	if !tok.Expiry.IsZero() {
		t.refreshAt = tok.Expiry.Add(-min(refreshMargin, tok.Expiry.Sub(fetched)/10))
	}
	ts.mu.Lock()
	t.gen = ts.cur.gen + 1
	ts.cur = t
	ts.mu.Unlock()
	return t, true, nil
}

// cached returns the current token unless there is none, it is due for
// refresh, or it is of generation stale.
func (ts *tokenSource) cached(stale uint64) (token, bool) {
	ts.mu.Lock()
	t := ts.cur
	ts.mu.Unlock()
	if t.header == nil || (stale != 0 && t.gen == stale) || (!t.refreshAt.IsZero() && !ts.now().Before(t.refreshAt)) {
		return token{}, false
	}
	return t, true
}

// tokenError says why a token was not had without what the token
// endpoint's body held: a refusal of the client (400, 401) wraps
// classify.ErrCredentialsRefused (permanent); any other failure is
// transient.
func tokenError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil {
		msg := fmt.Sprintf("oauth2 token endpoint answered HTTP %d", re.Response.StatusCode)
		if re.ErrorCode != "" {
			msg += " (" + re.ErrorCode + ")"
		}
		if c := re.Response.StatusCode; c == http.StatusBadRequest || c == http.StatusUnauthorized {
			return fmt.Errorf("%w: %s: check the endpoint's client id and secret", classify.ErrCredentialsRefused, msg)
		}
		return errors.New(msg)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its URL is the endpoint's configuration, not news
	}
	return fmt.Errorf("oauth2 token endpoint: %w", err)
}
