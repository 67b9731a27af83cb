package ingest

import (
	"context"
	"net/http"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/transform"
)

// validateTransformation compiles an endpoint's transformation (empty:
// none); the fan-outs compile it again once into the tenant's part of
// the cache (transform.Cache: runtimes are never shared by tenants). Every error Compile returns is the
// author's: a script over transform.MaxScriptBytes, one that does not
// compile (goja's message and position), one whose top level throws or
// runs over the time limit, one that defines no handler. They are
// INVALID_ARGUMENT.
func (c *contentRules) validateTransformation(src string) error {
	if src == "" {
		return nil
	}
	if _, err := transform.Compile(src); err != nil {
		return invalid("transformation", "%v", err)
	}
	return nil
}

// transformDelivery runs ep's transformation, if any, on d, a first
// delivery being built at fan-out (DESIGN I43): once per (event,
// endpoint), after the filter matched. On success d carries the
// transformed body and event type and, in d.Transformed, the url,
// method and headers its attempts use. A handler that cancels, throws,
// runs over its time limit or returns an invalid webhook still leaves a
// record, marked with the outcome, which the dispatcher ends without an
// attempt (CANCELLED, or FAILED with a dead letter): every accepted
// delivery keeps its id and reaches exactly one terminal result through
// the one path that writes results, and the publish's answer (the
// delivery ids) stays true.
func (c *contentRules) transformDelivery(ctx context.Context, ep *hooklinev1.Endpoint, d *hooklinev1.Delivery) {
	src := ep.GetTransformation()
	if src == "" {
		return
	}
	p, err := c.transforms.Get(ep.GetTenantId(), src)
	if err != nil { // validated at create/update: only an older record
		d.Transformed = &hooklinev1.Transformed{Error: err.Error()}
		return
	}
	res, err := p.Run(ctx, transform.Webhook{
		EventType: d.GetEventType(),
		Payload:   d.GetPayload(),
		URL:       ep.GetUrl(),
		Method:    http.MethodPost,
		Headers:   map[string]string{},
	}, transform.Limits{
		MaxPayloadBytes: c.maxPayloadBytes,
		ValidateURL:     c.urls.validateURL,
	})
	switch {
	case err != nil:
		d.Transformed = &hooklinev1.Transformed{Error: err.Error()}
	case res.Cancelled:
		d.Transformed = &hooklinev1.Transformed{Cancelled: true}
	default:
		w := res.Webhook
		d.Payload, d.EventType = w.Payload, w.EventType
		t := &hooklinev1.Transformed{Method: w.Method, Headers: w.Headers}
		if w.URL != ep.GetUrl() {
			t.Url = w.URL
		}
		d.Transformed = t
	}
}
