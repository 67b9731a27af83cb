package console

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// pageNames are the pages, each templates/<name>.html over layout.html.
var pageNames = []string{"login", "endpoints", "deliveries", "delivery", "error"}

var funcs = template.FuncMap{
	"slug": func(h Health) string { return strings.ReplaceAll(string(h), " ", "-") },
	"when": func(ts *timestamppb.Timestamp) string {
		if ts == nil {
			return "—"
		}
		return ts.AsTime().UTC().Format("2006-01-02 15:04:05.000Z")
	},
	"ms": func(d *durationpb.Duration) string {
		if d == nil {
			return "—"
		}
		return d.AsDuration().Round(time.Millisecond).String()
	},
	"state": func(s hooklinev1.DeliveryState) string {
		return strings.ToLower(strings.TrimPrefix(s.String(), "DELIVERY_STATE_"))
	},
	"class": func(c hooklinev1.OutcomeClass) string {
		return strings.ToLower(strings.TrimPrefix(c.String(), "OUTCOME_CLASS_"))
	},
	// authMethod names an endpoint's receiver auth, never its values.
	"authMethod": func(a *hooklinev1.ReceiverAuth) string {
		switch {
		case a.GetBasic() != nil:
			return "basic"
		case a.GetBearer() != nil:
			return "bearer token"
		case a.GetOauth2ClientCredentials() != nil:
			return "OAuth2 client credentials"
		}
		return ""
	},
	"batch":   batchSettings,
	"held":    Held,
	"headers": requestHeaders,
	"excerpt": func(b []byte) string {
		const limit = 300
		s := strings.ToValidUTF8(string(b), "�")
		if len(s) > limit {
			return s[:limit] + "…"
		}
		return s
	},
}

func parsePages() map[string]*template.Template {
	out := map[string]*template.Template{}
	for _, name := range pageNames {
		out[name] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html"))
	}
	return out
}

// batchSettings says what an endpoint's batch settings do, with the
// defaults of those unset (proto/hookline/v1/endpoint.proto); "" when
// the endpoint does not batch.
func batchSettings(b *hooklinev1.BatchSettings) string {
	if b == nil {
		return ""
	}
	size := "1 MiB"
	if n := b.GetMaxBytes(); n > 0 {
		size = fmt.Sprintf("%d bytes", n)
	}
	wait := "a partial batch waits up to 1s for more"
	if w := b.GetMaxWait(); w != nil {
		wait = "a partial batch waits up to " + w.AsDuration().String() + " for more"
		if w.AsDuration() == 0 {
			wait = "a partial batch is sent at once"
		}
	}
	return fmt.Sprintf("up to %d events and %s a request; %s", b.GetMaxEvents(), size, wait)
}
