package console

import (
	"crypto/sha256"
	"errors"
	"fmt"
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

// fail shows err on page with the status its gRPC code maps to.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, page string, v view, err error) {
	code := http.StatusInternalServerError
	msg := err.Error()
	if st, ok := status.FromError(err); ok {
		msg = st.Message()
		code = httpCode(st.Code().String())
	}
	v.Error = msg
	s.render(w, r, page, v, code)
}

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
	key := strings.TrimSpace(r.PostFormValue("api_key"))
	tenant, admin, ok := s.backend.SignIn(key)
	if !ok {
		s.render(w, r, "login", view{Error: "That API key is not valid."}, http.StatusUnauthorized)
		return
	}
	s.setCookie(w, cookieName, s.sessions.create(tenant, admin, sha256.Sum256([]byte(key))), int(sessionTTL.Seconds()))
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	s.setCookie(w, cookieName, "", -1)
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
			s.fail(w, r, "deliveries", v, fmt.Errorf("state %q is not one of %s", f.State, strings.Join(v.States, ", ")))
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
			s.fail(w, r, "deliveries", v, fmt.Errorf("time %q: want YYYY-MM-DDTHH:MM", t.in))
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
		s.fail(w, r, "error", view{}, err)
		return
	}
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
		s.fail(w, r, "error", view{}, err)
		return
	}
	msg := fmt.Sprintf("Recovering %d deliveries to %s (%d no longer have a payload).", total, id, unavailable)
	s.setFlash(w, msg)
	http.Redirect(w, r, "/deliveries?endpoint="+url.QueryEscape(id), http.StatusSeeOther)
}
