package main

import (
	"context"
	"fmt"
)

// benchFilters are realistic content filters over benchPayload (an
// invoice.paid of 4,200 EUR): each matches it, so a filtered fan-out
// writes as many deliveries as a plain one and only the filters' cost
// differs.
var benchFilters = []string{
	`payload.amount > 1000 && payload.currency == "eur"`,
	`type.startsWith("bench.") && has(payload.invoice)`,
	`payload.currency in ["eur", "gbp", "usd"]`,
	`payload.type == "invoice.paid" && payload.amount >= 50`,
	`has(payload.invoice) && payload.invoice.startsWith("in_")`,
}

// benchTransformation reshapes the invoice for a chat channel, as a
// receiver's own proxy would: new body, a header, the same URL.
const benchTransformation = `function handler(webhook) {
  var p = webhook.payload;
  var amount = (p.amount / 100).toFixed(2);
  var text = "Invoice " + p.invoice + " paid: " + amount + " " + String(p.currency).toUpperCase();
  webhook.payload = {
    text: text,
    blocks: [
      {type: "section", text: {type: "mrkdwn", text: "*" + text + "*"}},
      {type: "context", elements: [{type: "mrkdwn", text: "event " + webhook.eventType}]}
    ]
  };
  webhook.headers["x-hookline-bench"] = "transformed";
  return webhook;
}`

// runFilters measures ingest's PublishEvent rate at fan-out 10 as fast
// as it answers, first to ten plain endpoints, then to ten endpoints with
// a content filter each (one also transforming): issue 28 wants the
// second at least 80% of the first.
func runFilters(ctx context.Context, b *bench) error {
	var plain, filtered closedRun
	_, err := withSession(ctx, b, "filters", func(ctx context.Context, s *session) error {
		if err := liftedFanout(ctx, s, "plain", "bench.plain10", 10); err != nil {
			return err
		}
		specs := make([]endpointSpec, 10)
		for i := range specs {
			specs[i] = endpointSpec{
				url:         s.rcv.handle(fmt.Sprintf("/filtered/%d", i), route{group: "filtered"}),
				eventTypes:  []string{"bench.filtered10"},
				maxInFlight: 64, rate: 100000,
				filter: benchFilters[i%len(benchFilters)],
			}
		}
		specs[0].transform = benchTransformation
		if _, err := s.h.createEndpoints(ctx, specs); err != nil {
			return err
		}
		plain = maxPublish(ctx, b, s, b.cfg.Publishers, "plain10", func(int) string { return "bench.plain10" })
		if ctx.Err() != nil {
			return ctx.Err()
		}
		filtered = maxPublish(ctx, b, s, b.cfg.Publishers, "filtered10", func(int) string { return "bench.filtered10" })
		return ctx.Err()
	})
	if err != nil {
		return err
	}
	perSecCell := func(v float64) string { return fmt.Sprintf("%.0f/s", v) }
	b.rep.addFigure("PublishEvent/s at fan-out 10, no filter", plain.rate, perSecCell, fmt.Sprintf("(%d callers; call %s)", b.cfg.Publishers, plain.q), nil)
	b.rep.addFigure("PublishEvent/s at fan-out 10, a filter on each endpoint, a transformation on one", filtered.rate, perSecCell, fmt.Sprintf("(%d callers; call %s)", b.cfg.Publishers, filtered.q), nil)
	ratio := 0.0
	if plain.rate > 0 {
		ratio = filtered.rate / plain.rate
	}
	b.rep.addFigure("filtered / plain", ratio, func(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) }, "", func(float64) string { return "target ≥ 80%" })
	if plain.errs+filtered.errs > 0 {
		b.rep.add("publish errors (plain / filtered)", fmt.Sprintf("%d / %d", plain.errs, filtered.errs), "")
	}
	return nil
}
