package console

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// view is what every page template gets.
type view struct {
	Tenant, CSRF string
	Admin        bool
	Flash, Error string

	Endpoints  []EndpointHealth
	Deliveries []*hooklinev1.DeliveryStatus
	Delivery   *hooklinev1.GetDeliveryResponse
	Filter     filterForm
	States     []string
	Next       string
	// Now is when the page is rendered (the console's clock): what
	// "held" is judged against.
	Now time.Time
	// Held says why Delivery waits without an attempt (Held), if it does.
	Held string
	// Payload is the delivery's event payload, as text.
	Payload string
}

// filterForm is the delivery log's filters as the form sends them.
type filterForm struct {
	Endpoint, Type, State, Since, Until string
}

// formTime is the layout of a datetime-local input, read as UTC.
const formTime = "2006-01-02T15:04"

func (s *Server) render(w http.ResponseWriter, r *http.Request, page string, v view, code int) {
	if sess := sessionFrom(r); sess != nil {
		v.Tenant, v.CSRF, v.Admin = sess.tenant, sess.csrf, sess.admin
	}
	if v.Flash == "" {
		v.Flash = s.takeFlash(w, r)
	}
	v.Now = s.now()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	if err := s.pages[page].Execute(w, v); err != nil {
		s.log.WarnContext(r.Context(), "console: render", "page", page, "err", err)
	}
}

// fail shows err on page with the status its gRPC code maps to. The
// banner says what went wrong in the console's own words: a message that
// may quote the request (an id from the path, a filter from the query:
// NotFound and InvalidArgument, the console's own parse errors) is
// replaced by a fixed one, so a link cannot put text of its sender's
// choosing in the console's error banner. Only messages about state
// (paused, overloaded, unavailable) are shown as the API gives them.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, page string, v view, err error) {
	code := http.StatusInternalServerError
	msg := "Something went wrong; the error is in ingest's log."
	var input inputError
	switch st, ok := status.FromError(err); {
	case errors.As(err, &input):
		code, msg = http.StatusBadRequest, string(input)
	case ok:
		code = httpCode(st.Code().String())
		switch st.Code().String() {
		case "NotFound":
			msg = "Not found: no such delivery, event or endpoint for this tenant."
		case "InvalidArgument", "OutOfRange":
			msg = "The request is not valid: check the filters and try again."
		case "PermissionDenied":
			msg = "This API key may not do that."
		case "FailedPrecondition", "ResourceExhausted", "Unavailable", "DeadlineExceeded", "Aborted":
			msg = st.Message()
		}
		if code == http.StatusInternalServerError {
			s.log.WarnContext(r.Context(), "console: backend error", "err", err)
		}
	}
	v.Error = msg
	s.render(w, r, page, v, code)
}

// inputError is a console check of the request's own input; its text is
// fixed (it never quotes the input).
type inputError string

func (e inputError) Error() string { return string(e) }

func httpCode(grpcCode string) int {
	switch grpcCode {
	case "InvalidArgument", "FailedPrecondition", "OutOfRange":
		return http.StatusBadRequest
	case "NotFound":
		return http.StatusNotFound
	case "PermissionDenied":
		return http.StatusForbidden
	case "Unavailable", "DeadlineExceeded":
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, "login", view{}, http.StatusOK)
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	client, now := clientOf(r), s.now()
	if d := s.throttle.wait(client, now); d > 0 {
		s.log.DebugContext(r.Context(), "console audit", "event", "sign_in_throttled", "remote", r.RemoteAddr)
		w.Header().Set("Retry-After", retryAfter(d))
		s.render(w, r, "login", view{Error: "Too many sign-in attempts: wait a little and try again."}, http.StatusTooManyRequests)
		return
	}
	key := strings.TrimSpace(r.PostFormValue("api_key"))
	tenant, admin, ok := s.backend.SignIn(key)
	if !ok {
		s.throttle.failed(client, now)
		s.audit(r, "sign_in_refused", nil)
		s.render(w, r, "login", view{Error: "That API key is not valid."}, http.StatusUnauthorized)
		return
	}
	value, id := s.sessions.create(tenant, admin, sha256.Sum256([]byte(key)))
	s.audit(r, "sign_in", &session{tenant: tenant, admin: admin, id: id})
	s.setCookie(w, cookieName, value, int(SessionTTL.Seconds()))
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// logout revokes the session, so that its cookie, wherever a copy of it
// is, no longer opens, then clears it from the browser.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	sess := sessionFrom(r)
	s.setCookie(w, cookieName, "", -1)
	if err := s.revocations.Revoke(r.Context(), sess.id, sess.expires); err != nil {
		s.audit(r, "sign_out_failed", sess, slog.String("err", err.Error()))
		s.render(w, r, "error", view{Error: "Signed out of this browser, but the sign-out could not be recorded: a copy of this session's cookie works until it expires. Try signing in and out again."}, http.StatusServiceUnavailable)
		return
	}
	s.audit(r, "sign_out", sess)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

func (s *Server) endpointsPage(w http.ResponseWriter, r *http.Request) {
	eps, err := s.backend.Endpoints(r.Context())
	if err != nil {
		s.fail(w, r, "endpoints", view{}, err)
		return
	}
	// Each look-up is bounded (ingest's --dns-timeout); they run
	// together so the page waits for the slowest only.
	var wg sync.WaitGroup
	for i := range eps {
		wg.Go(func() { eps[i].Note = s.backend.URLNote(r.Context(), eps[i].Endpoint.GetUrl()) })
	}
	wg.Wait()
	s.render(w, r, "endpoints", view{Endpoints: eps}, http.StatusOK)
}

func (s *Server) deliveriesPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := filterForm{Endpoint: q.Get("endpoint"), Type: q.Get("type"), State: q.Get("state"), Since: q.Get("since"), Until: q.Get("until")}
	v := view{Filter: f, States: stateNames()}
	eps, err := s.backend.Endpoints(r.Context())
	if err != nil {
		s.fail(w, r, "deliveries", v, err)
		return
	}
	v.Endpoints = eps
	req := &hooklinev1.ListDeliveriesRequest{EndpointId: f.Endpoint, EventType: f.Type, PageSize: 50, PageToken: q.Get("page")}
	if f.State != "" {
		st, ok := hooklinev1.DeliveryState_value["DELIVERY_STATE_"+strings.ToUpper(f.State)]
		if !ok {
			s.fail(w, r, "deliveries", v, inputError("Unknown state: pick one from the list."))
			return
		}
		req.State = hooklinev1.DeliveryState(st)
	}
	for _, t := range []struct {
		in  string
		out **timestamppb.Timestamp
	}{{f.Since, &req.Since}, {f.Until, &req.Until}} {
		if t.in == "" {
			continue
		}
		at, err := time.Parse(formTime, t.in)
		if err != nil {
			s.fail(w, r, "deliveries", v, inputError("Times are YYYY-MM-DDTHH:MM (UTC)."))
			return
		}
		*t.out = timestamppb.New(at)
	}
	resp, err := s.backend.ListDeliveries(r.Context(), req)
	if err != nil {
		s.fail(w, r, "deliveries", v, err)
		return
	}
	v.Deliveries = resp.GetDeliveries()
	if tok := resp.GetNextPageToken(); tok != "" {
		q.Set("page", tok)
		v.Next = "/deliveries?" + q.Encode()
	}
	s.render(w, r, "deliveries", v, http.StatusOK)
}

func stateNames() []string {
	var out []string
	for i := int32(1); ; i++ {
		name, ok := hooklinev1.DeliveryState_name[i]
		if !ok {
			return out
		}
		out = append(out, strings.ToLower(strings.TrimPrefix(name, "DELIVERY_STATE_")))
	}
}

func (s *Server) deliveryPage(w http.ResponseWriter, r *http.Request) {
	d, err := s.backend.GetDelivery(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, "error", view{}, err)
		return
	}
	v := view{Delivery: d, Held: Held(d.GetDelivery(), s.now())}
	// The payload is the event's; an event no longer retained leaves
	// the timeline without it.
	if ev, err := s.backend.Event(r.Context(), d.GetDelivery().GetEventId()); err == nil {
		v.Payload = strings.ToValidUTF8(string(ev.GetPayload()), "\uFFFD")
	} else {
		v.Payload = "(not available: " + status.Convert(err).Message() + ")"
	}
	s.render(w, r, "delivery", v, http.StatusOK)
}

// errNotAdmin answers an action by a key without the admin scope.
var errNotAdmin = errors.New("this API key may read but not act: sign in with an admin key to resend or recover")

func (s *Server) resend(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !sessionFrom(r).admin {
		http.Error(w, errNotAdmin.Error(), http.StatusForbidden)
		return
	}
	attempt, err := s.backend.Resend(r.Context(), id)
	if err != nil {
		s.audit(r, "resend", sessionFrom(r), slog.String("delivery", id), slog.String("outcome", status.Code(err).String()))
		s.fail(w, r, "error", view{}, err)
		return
	}
	s.audit(r, "resend", sessionFrom(r), slog.String("delivery", id), slog.String("outcome", "OK"), slog.Uint64("attempt", uint64(attempt)))
	s.setFlash(w, fmt.Sprintf("Resend asked: attempt %d.", attempt))
	http.Redirect(w, r, "/deliveries/"+url.PathEscape(id), http.StatusSeeOther)
}

func (s *Server) recoverEndpoint(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !sessionFrom(r).admin {
		http.Error(w, errNotAdmin.Error(), http.StatusForbidden)
		return
	}
	since, err := time.Parse(formTime, r.PostFormValue("since"))
	if err != nil {
		http.Error(w, "since: want YYYY-MM-DDTHH:MM (UTC)", http.StatusBadRequest)
		return
	}
	total, unavailable, err := s.backend.Recover(r.Context(), id, since)
	if err != nil {
		s.audit(r, "recover", sessionFrom(r), slog.String("endpoint", id), slog.Time("since", since), slog.String("outcome", status.Code(err).String()))
		s.fail(w, r, "error", view{}, err)
		return
	}
	s.audit(r, "recover", sessionFrom(r), slog.String("endpoint", id), slog.Time("since", since), slog.String("outcome", "OK"), slog.Int("deliveries", total))
	msg := fmt.Sprintf("Recovering %d deliveries to %s (%d no longer have a payload).", total, id, unavailable)
	s.setFlash(w, msg)
	http.Redirect(w, r, "/deliveries?endpoint="+url.QueryEscape(id), http.StatusSeeOther)
}
