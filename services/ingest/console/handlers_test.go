package console

import (
	"context"
	"crypto/sha256"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/services/ingest/apikey"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// fakeBackend answers for tenant "acme"; key "admin-key" may act,
// "reader-key" only read. It records the tenant of each call.
type fakeBackend struct {
	eps     []EndpointHealth // the endpoints; nil: ep_1 in outage
	tenants []string
	resent  []string
	revoked map[string]bool
	// attempts are GetDelivery's.
	attempts []*hooklinev1.AttemptResult
}

func (f *fakeBackend) SignIn(key string) (string, bool, bool) {
	return f.SignedIn(sha256.Sum256([]byte(key)))
}

func (f *fakeBackend) SignedIn(sum [sha256.Size]byte) (string, bool, bool) {
	for key, admin := range map[string]bool{"admin-key": true, "reader-key": false} {
		if sum == sha256.Sum256([]byte(key)) && !f.revoked[key] {
			return "acme", admin, true
		}
	}
	return "", false, false
}

func (f *fakeBackend) Endpoints(ctx context.Context) ([]EndpointHealth, error) {
	f.tenants = append(f.tenants, apikey.TenantFrom(ctx))
	if f.eps != nil {
		return f.eps, nil
	}
	return []EndpointHealth{{Endpoint: &hooklinev1.Endpoint{Id: "ep_1", Url: "https://example.com/h"}, Health: HealthOutage, Detail: "the last 5 deliveries failed"}}, nil
}

func (f *fakeBackend) ListDeliveries(ctx context.Context, req *hooklinev1.ListDeliveriesRequest) (*hooklinev1.ListDeliveriesResponse, error) {
	f.tenants = append(f.tenants, apikey.TenantFrom(ctx))
	return &hooklinev1.ListDeliveriesResponse{Deliveries: []*hooklinev1.DeliveryStatus{{DeliveryId: "dlv_1", EndpointId: req.GetEndpointId(), State: req.GetState()}}, NextPageToken: "tok"}, nil
}

func (f *fakeBackend) GetDelivery(ctx context.Context, id string) (*hooklinev1.GetDeliveryResponse, error) {
	return &hooklinev1.GetDeliveryResponse{Delivery: &hooklinev1.DeliveryStatus{DeliveryId: id}, Attempts: f.attempts}, nil
}

func (f *fakeBackend) Event(_ context.Context, id string) (*hooklinev1.GetEventResponse, error) {
	return &hooklinev1.GetEventResponse{EventId: id, Payload: []byte(`{"n":1}`)}, nil
}

func (f *fakeBackend) Resend(_ context.Context, id string) (uint32, error) {
	f.resent = append(f.resent, id)
	return 3, nil
}

func (f *fakeBackend) Recover(context.Context, string, time.Time) (int, int, error) { return 0, 0, nil }

func (f *fakeBackend) URLNote(_ context.Context, u string) string {
	if u == "https://example.com/h" {
		return `host "example.com" does not resolve now`
	}
	return ""
}

// TestEndpointsPageSaysWhenAnEndpointsHostDoesNotResolve: an accepted
// URL whose host does not resolve is said so on the endpoints page.
func TestEndpointsPageSaysWhenAnEndpointsHostDoesNotResolve(t *testing.T) {
	srv := httptest.NewServer(New(&fakeBackend{}).Handler())
	defer srv.Close()
	_, page := signIn(t, srv, "reader-key")
	if !strings.Contains(page, `host &#34;example.com&#34; does not resolve now`) {
		t.Fatalf("the endpoints page does not say the host does not resolve:\n%s", page)
	}
}

// TestEndpointsPageShowsFilterAndTransformation: the endpoints page
// shows an endpoint's filter and transformation script, escaped, each in
// a <pre>, and no such row for an endpoint without them.
func TestEndpointsPageShowsFilterAndTransformation(t *testing.T) {
	script := "function handler(w) {\n  w.headers[\"x-tag\"] = \"</pre><script>alert(1)</script>\";\n  return w;\n}"
	srv := httptest.NewServer(New(&fakeBackend{eps: []EndpointHealth{
		{Endpoint: &hooklinev1.Endpoint{Id: "ep_1", Url: "https://a.example/h", Filter: `payload.amount > 1000 && metadata.region in ["eu"]`, Transformation: script}, Health: HealthActive},
		{Endpoint: &hooklinev1.Endpoint{Id: "ep_2", Url: "https://b.example/h"}, Health: HealthActive},
	}}).Handler())
	defer srv.Close()
	_, page := signIn(t, srv, "reader-key")
	if !strings.Contains(page, `<pre class="mono">payload.amount &gt; 1000 &amp;&amp; metadata.region in [&#34;eu&#34;]</pre>`) {
		t.Fatalf("the endpoints page does not show the filter, escaped, in a <pre>:\n%s", page)
	}
	want := "<pre class=\"mono\">function handler(w) {\n  w.headers[&#34;x-tag&#34;] = &#34;&lt;/pre&gt;&lt;script&gt;alert(1)&lt;/script&gt;&#34;;\n  return w;\n}</pre>"
	if !strings.Contains(page, want) || strings.Contains(page, "<script>alert(1)") {
		t.Fatalf("the endpoints page does not show the script, escaped, in a <pre>:\n%s", page)
	}
	if n := strings.Count(page, `<tr class="filter">`) + strings.Count(page, `<tr class="transformation">`); n != 2 {
		t.Fatalf("%d filter or transformation rows, want 2 (ep_2 has neither)", n)
	}
}

// signIn returns a client with a session for key, and the page it lands on.
func signIn(t *testing.T, srv *httptest.Server, key string) (*http.Client, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.PostForm(srv.URL+"/login", url.Values{"api_key": {key}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return c, string(body)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func TestConsoleSignInScopesToTheTenantAndGuardsActions(t *testing.T) {
	be := &fakeBackend{}
	srv := httptest.NewServer(New(be).Handler())
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/deliveries")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Request.URL.Path != "/login" {
		t.Fatalf("signed out: landed on %v; want /login", resp.Request.URL)
	}
	if _, page := signIn(t, srv, "wrong-key"); !strings.Contains(page, "not valid") {
		t.Fatal("a wrong key was not refused")
	}
	c, page := signIn(t, srv, "admin-key")
	if !strings.Contains(page, "outage mode") || !strings.Contains(page, "ep_1") {
		t.Fatalf("endpoints page after sign-in lacks the endpoint and its health:\n%s", page)
	}
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no CSRF token on the page")
	}
	resp, err = c.Get(srv.URL + "/deliveries?endpoint=ep_1&state=failed")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("delivery log: %v, %v", resp.Status, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "dlv_1") || !strings.Contains(string(body), "page=tok") {
		t.Fatalf("delivery log lacks the delivery or the next page link:\n%s", body)
	}
	for _, tenant := range be.tenants {
		if tenant != "acme" {
			t.Fatalf("a backend call ran for tenant %q", tenant)
		}
	}

	resp, err = c.PostForm(srv.URL+"/deliveries/dlv_1/resend", url.Values{"csrf": {"forged"}})
	if err == nil {
		resp.Body.Close()
	}
	if err != nil || resp.StatusCode != http.StatusForbidden || len(be.resent) != 0 {
		t.Fatalf("resend with a wrong CSRF token: %v, %v, resent %v; want 403 and nothing resent", resp.Status, err, be.resent)
	}
	resp, err = c.PostForm(srv.URL+"/deliveries/dlv_1/resend", url.Values{"csrf": {m[1]}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(be.resent) != 1 {
		t.Fatalf("resend: %v, resent %v", resp.Status, be.resent)
	}
	if !strings.Contains(string(body), "attempt 3") {
		t.Fatalf("the page after a resend does not say so:\n%s", body)
	}

	reader, page := signIn(t, srv, "reader-key")
	m = csrfRE.FindStringSubmatch(page)
	if strings.Contains(page, "Recover") || m == nil {
		t.Fatal("a read-only key is offered recover, or has no CSRF token")
	}
	resp, err = reader.PostForm(srv.URL+"/deliveries/dlv_1/resend", url.Values{"csrf": {m[1]}})
	if err == nil {
		resp.Body.Close()
	}
	if err != nil || resp.StatusCode != http.StatusForbidden || len(be.resent) != 1 {
		t.Fatalf("resend by a read-only key: %v, %v; want 403", resp.Status, err)
	}
}

func TestConsoleCookieIsHttpOnlyStrictAndSecureUnderTLS(t *testing.T) {
	for _, tls := range []bool{false, true} {
		var opts []Option
		if tls {
			opts = append(opts, WithTLS())
		}
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader("api_key=admin-key"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		New(&fakeBackend{}, opts...).Handler().ServeHTTP(rec, req)
		c := rec.Result().Cookies()
		if len(c) != 1 || !c[0].HttpOnly || c[0].SameSite != http.SameSiteStrictMode || c[0].Secure != tls {
			t.Fatalf("TLS %v: cookie %+v", tls, c)
		}
	}
}

func TestConsoleRefusesACrossSitePost(t *testing.T) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader("api_key=admin-key"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	New(&fakeBackend{}).Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden || len(rec.Result().Cookies()) != 0 {
		t.Fatalf("cross-site sign-in: %d, cookies %v; want 403 and no session", rec.Code, rec.Result().Cookies())
	}
}

// TestConsoleSessionIsServedByAnyReplicaAndEndsWithItsKey: a session is a
// signed cookie, so a replica that shares the session key serves a
// session another made (actions included); one with another key, a
// cookie altered or expired, and a session whose API key was revoked
// since, are sent to sign in.
func TestConsoleSessionIsServedByAnyReplicaAndEndsWithItsKey(t *testing.T) {
	be := &fakeBackend{revoked: map[string]bool{}}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	key := []byte("shared console session key, 32 bytes or more")
	a := httptest.NewServer(New(be, WithSessionKeys(key), WithClock(clock)).Handler())
	defer a.Close()
	// b has rotated: a new key first, the old one still opens.
	b := httptest.NewServer(New(be, WithSessionKeys([]byte("the next console session key, also 32+ bytes"), key), WithClock(clock)).Handler())
	defer b.Close()
	other := httptest.NewServer(New(be, WithSessionKeys([]byte("another console session key of 32+ bytes")), WithClock(clock)).Handler())
	defer other.Close()

	c, page := signIn(t, a, "admin-key")
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token after sign-in on replica a:\n%s", page)
	}
	signedIn := func(srv *httptest.Server) bool {
		t.Helper()
		resp, err := c.Get(srv.URL + "/deliveries")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Request.URL.Path == "/deliveries" && resp.StatusCode == http.StatusOK
	}
	if !signedIn(b) {
		t.Fatal("replica b does not serve the session replica a made")
	}
	resp, err := c.PostForm(b.URL+"/deliveries/dlv_1/resend", url.Values{"csrf": {m[1]}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(be.resent) != 1 || !strings.Contains(string(body), "attempt 3") {
		t.Fatalf("resend on replica b with replica a's CSRF token: %v, resent %v", resp.Status, be.resent)
	}
	if signedIn(other) {
		t.Fatal("a console with another session key accepted the session")
	}

	u, _ := url.Parse(a.URL)
	cookie := c.Jar.Cookies(u)[0]
	forged := *cookie
	forged.Value = strings.Replace(cookie.Value, ".", "A.", 1)
	c.Jar.SetCookies(u, []*http.Cookie{&forged})
	if signedIn(b) {
		t.Fatal("an altered cookie was accepted")
	}
	c.Jar.SetCookies(u, []*http.Cookie{cookie})
	if !signedIn(b) {
		t.Fatal("the session did not come back with its cookie")
	}

	now = now.Add(SessionTTL)
	if signedIn(b) {
		t.Fatal("an expired session was accepted")
	}
	now = now.Add(-time.Hour)
	be.revoked["admin-key"] = true
	if signedIn(a) || signedIn(b) {
		t.Fatal("a session outlived the revocation of its API key")
	}
}

// TestEndpointsPageShowsWhichCredentialsAreSetNeverTheirValues: the
// endpoints page names an endpoint's custom headers (secret ones as set
// or unset), its auth method and its client certificate's expiry, and
// no header value, password, token or certificate.
func TestEndpointsPageShowsWhichCredentialsAreSetNeverTheirValues(t *testing.T) {
	notAfter := time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC)
	srv := httptest.NewServer(New(&fakeBackend{eps: []EndpointHealth{
		{Endpoint: &hooklinev1.Endpoint{Id: "ep_1", Url: "https://a.example/h",
			Headers:   []*hooklinev1.EndpointHeader{{Name: "X-Route", Value: "route-value-eu"}, {Name: "X-Api-Key", Secret: true, ValueSet: true}},
			Auth:      &hooklinev1.ReceiverAuth{Method: &hooklinev1.ReceiverAuth_Basic_{Basic: &hooklinev1.ReceiverAuth_Basic{Username: "user-name-x", PasswordSet: true}}},
			ClientTls: &hooklinev1.ClientTLS{Certificate: "-----BEGIN CERTIFICATE-----", PrivateKeySet: true, NotAfter: timestamppb.New(notAfter)}}, Health: HealthActive},
		{Endpoint: &hooklinev1.Endpoint{Id: "ep_2", Url: "https://b.example/h"}, Health: HealthActive},
	}}).Handler())
	defer srv.Close()
	_, page := signIn(t, srv, "reader-key")
	for _, want := range []string{"<code>X-Route</code>", "<code>X-Api-Key</code> <small>(secret, set)</small>", "Auth: basic", "Client certificate (mutual TLS), expires 2027-01-02 03:04:05.000Z"} {
		if !strings.Contains(page, want) {
			t.Fatalf("the endpoints page lacks %q:\n%s", want, page)
		}
	}
	for _, never := range []string{"route-value-eu", "user-name-x", "BEGIN CERTIFICATE"} {
		if strings.Contains(page, never) {
			t.Fatalf("the endpoints page shows %q", never)
		}
	}
	if n := strings.Count(page, `<tr class="credentials">`); n != 1 {
		t.Fatalf("%d credential rows, want 1 (ep_2 has none)", n)
	}
}
