package console

import (
	"log/slog"
	"net/http"
)

// audit writes one structured line ("console audit") for a sign-in, a
// refused sign-in, a sign-out or an action: the event, the client's
// address, and for a session its tenant and id (never the key), then
// attrs.
func (s *Server) audit(r *http.Request, event string, sess *session, attrs ...slog.Attr) {
	base := []slog.Attr{slog.String("event", event), slog.String("remote", r.RemoteAddr)}
	if sess != nil {
		base = append(base, slog.String("tenant", sess.tenant), slog.String("session", sess.id), slog.Bool("admin", sess.admin))
	}
	s.log.LogAttrs(r.Context(), slog.LevelInfo, "console audit", append(base, attrs...)...)
}
