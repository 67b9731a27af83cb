package attempt

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/badreceiver"
	"github.com/hookline/hookline/platform/netguard"
)

func listen(t *testing.T, a badreceiver.Answer) *badreceiver.Server {
	t.Helper()
	s, err := badreceiver.Listen(a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// TestMisbehavingReceiversGetAClassifiedOutcomeInBoundedTime: whatever a
// receiver sends (or does not), the attempt ends within its timeout plus
// slack, with a class, reading at most ExcerptBytes+drainBytes of the
// response and never following a redirect, whatever its target.
func TestMisbehavingReceiversGetAClassifiedOutcomeInBoundedTime(t *testing.T) {
	// A case that tests the timeout itself gets a short one; a receiver
	// that does answer (a status, a failed handshake) gets a longer one,
	// so that on a loaded machine (45 cases at once, -race) it is
	// classified by what it sent, not by a handshake that ran out of time.
	const short, patient = time.Second, 5 * time.Second
	const slack = 4 * time.Second // scheduling slack on a loaded machine
	transient := hooklinev1.OutcomeClass_OUTCOME_CLASS_TRANSIENT
	success := hooklinev1.OutcomeClass_OUTCOME_CLASS_SUCCESS

	// Where redirects point: a loopback receiver that must never be hit.
	var internalHit atomic.Int32
	internal := listen(t, func(c net.Conn) {
		internalHit.Add(1)
		_, _ = io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
	})
	selfSigned := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(selfSigned.Close)
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(plain.Close)
	silentTLS := listen(t, nil) // reads the ClientHello as a request, fails, closes
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mute.Close() }) // accepts (backlog), never speaks

	type tc struct {
		name       string
		url        string // default: a badreceiver running answer
		answer     badreceiver.Answer
		wantClass  hooklinev1.OutcomeClass
		wantStatus int    // 0: no response
		wantErr    string // part of the transport error, if any
		wantBody   int    // excerpt length, if checked
	}
	tests := []tc{
		{name: "endless body", answer: badreceiver.EndlessBody, wantClass: success, wantStatus: 200, wantBody: ExcerptBytes},
		{name: "endless chunked body, trickled", answer: badreceiver.TrickledBody, wantClass: transient, wantStatus: 503},
		{name: "10 MB response", answer: badreceiver.HugeBody, wantClass: transient, wantStatus: 500, wantBody: ExcerptBytes},
		{name: "slowloris headers", answer: badreceiver.SlowlorisHeaders, wantClass: transient, wantErr: "no response within"},
		{name: "headers over 64 KiB", answer: badreceiver.HugeHeaders, wantClass: transient, wantErr: "header"},
		{name: "endless 1xx responses", answer: badreceiver.Endless1xx, wantClass: transient},
		{name: "garbage instead of HTTP", answer: badreceiver.Garbage, wantClass: transient, wantErr: "malformed HTTP"},
		{name: "closed before answering", wantClass: transient, wantErr: "EOF"},
		{name: "closed mid-headers", answer: badreceiver.CloseMidHeaders, wantClass: transient, wantErr: "malformed"},
		{name: "closed mid-body", answer: badreceiver.CloseMidBody, wantClass: success, wantStatus: 200, wantBody: 3},
		{name: "never answers", answer: badreceiver.Hang, wantClass: transient, wantErr: "no response within"},
		{name: "https, self-signed certificate", url: selfSigned.URL, wantClass: transient, wantErr: "certificate"},
		{name: "https to a plaintext server", url: strings.Replace(plain.URL, "http://", "https://", 1), wantClass: transient, wantErr: "HTTP response to HTTPS client"},
		{name: "https, handshake cut", url: "https://" + silentTLS.Addr(), wantClass: transient, wantErr: "EOF"},
		{name: "https, handshake never answered", url: "https://" + mute.Addr().String(), wantClass: transient, wantErr: "no response within"},
	}
	for _, loc := range []string{
		internal.URL("/"),
		"http://169.254.169.254/latest/meta-data/",
		"http://[::1]/",
		"http://localhost/",
		"http://metadata.google.internal/",
		"http://10.0.0.1/",
	} {
		for _, code := range []int{301, 302, 303, 307, 308} {
			tests = append(tests, tc{name: fmt.Sprintf("%d to %s", code, loc), answer: badreceiver.Redirect(code, loc), wantClass: transient, wantStatus: code})
		}
	}

	// The receivers are on loopback, so the guard allows it: a redirect
	// is refused by never being followed, not by the guard.
	g, err := netguard.NewPolicy(true, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := New(g)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			url := tt.url
			if url == "" {
				url = listen(t, tt.answer).URL("/hook")
			}
			timeout := patient
			if strings.Contains(tt.wantErr, "no response within") {
				timeout = short
			}
			bound := timeout + slack
			req := request(t, url)
			req.Timeout = timeout
			start := time.Now()
			res, err := c.Do(t.Context(), req)
			took := time.Since(start)
			if err != nil {
				t.Fatalf("a receiver's misbehaviour is an attempt outcome, not a worker fault: %v", err)
			}
			if took > bound {
				t.Errorf("took %v, want within the %v attempt timeout (+ slack)", took, timeout)
			}
			if res.Class != tt.wantClass {
				t.Errorf("class %v, want %v (status %d, err %v)", res.Class, tt.wantClass, res.StatusCode, res.Err)
			}
			if res.StatusCode != tt.wantStatus {
				t.Errorf("status %d, want %d (err %v)", res.StatusCode, tt.wantStatus, res.Err)
			}
			if tt.wantErr != "" && (res.Err == nil || !strings.Contains(strings.ToLower(res.Err.Error()), strings.ToLower(tt.wantErr))) {
				t.Errorf("err %v, want one mentioning %q", res.Err, tt.wantErr)
			}
			if tt.wantStatus != 0 && res.Err != nil {
				t.Errorf("a response arrived, yet err %v", res.Err)
			}
			if tt.wantBody != 0 && len(res.Excerpt) != tt.wantBody {
				t.Errorf("excerpt %d bytes, want %d", len(res.Excerpt), tt.wantBody)
			}
		})
	}
	t.Cleanup(func() {
		if n := internalHit.Load(); n > 0 {
			t.Errorf("a redirect was followed to an internal address %d times", n)
		}
	})
}
