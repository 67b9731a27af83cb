package e2e

import (
	"math/rand/v2"
)

// Content filters and transformations (issue 28) in the seeds' worlds.
// Half the seeds give one endpoint drawn by drawWorld (not the refusal
// burst's) a CEL filter that refuses the events marked skip — a quarter
// of that endpoint's, drawn — and a transformation that rebuilds the
// payload in JavaScript and adds a header. A refused event must get no
// delivery (publishAll checks PublishEvent's answer) and is no member
// of its lane; a transformed one must reach its receiver as the same
// member (the script keeps its fields), with one body across its
// attempts, and every rule of the model holds for it as for any other.
// The transformed endpoint's events are kept to 32 KiB, so the script's
// run stays far inside its time limit on a loaded machine. Drawn from a
// stream of its own.

const (
	// simContentType is the event type of the filtering endpoint's
	// events: published to no endpoint by name, so the filter runs.
	simContentType = "sim.content"
	simFilter      = `!has(payload.skip)`
	simTransform   = `function handler(webhook) {
  var p = webhook.payload;
  webhook.payload = {sim: p.sim, pad: p.pad};
  webhook.headers["` + simTransformHeader + `"] = "1";
  return webhook;
}`
	simTransformMaxSize = 32 << 10
	// simTransformHeader is the header the script sets; the receiver
	// counts a POST to the endpoint without it as a violation.
	simTransformHeader = "x-sim-transformed"
)

func (w *simWorld) drawContent(seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0xc0de7e5))
	if r.IntN(2) != 0 {
		return
	}
	var cands []*simEndpoint
	for _, ep := range w.eps[:w.drawn] {
		if ep != w.burstEp {
			cands = append(cands, ep)
		}
	}
	if len(cands) == 0 {
		return
	}
	ep := cands[r.IntN(len(cands))]
	ep.filter, ep.transform = simFilter, simTransform
	refused := 0
	for _, m := range w.members {
		if m.ep != ep {
			continue
		}
		m.size = min(m.size, simTransformMaxSize)
		if r.IntN(4) == 0 {
			m.filtered = true
			refused++
		}
	}
	w.t.Logf("seed %d: endpoint %s filters (%d of its events refused) and transforms", w.seed, ep.name, refused)
}
