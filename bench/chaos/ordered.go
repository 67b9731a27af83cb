package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// The ordered traffic of the crash scenarios, beside the unordered mix:
// orderedKeyEndpoints endpoints ordered per key with orderedKeys lanes
// each, and one endpoint ordered per endpoint whose publishes carry
// rotating ordering keys (ignored: the endpoint is one lane). Each lane
// is published by one goroutine, one event at a time, the next only
// after ingest accepted the one before: publish order is the order of
// the accepted answers. Lanes publish in bursts of orderedBurst events
// back to back, so a head's retry (1 s at least) always has followers
// waiting behind it: delivered without ordering, they would overtake it.
const (
	orderedKeyEndpoints = 2
	orderedKeys         = 20
	orderedBurst        = 3
	// orderedKeyEvery is how often each per-key lane publishes a burst
	// (40 lanes: 10 events/s in all); orderedEndpointEvery the
	// per-endpoint lane (0.5 events/s: one lane whose head fails one
	// time in four and whose followers then wait on the retry path, up
	// to --park-recheck, drains little faster than that, and its backlog
	// after a broker kill must settle within the settle wait).
	orderedKeyEvery      = 12 * time.Second
	orderedEndpointEvery = 6 * time.Second
)

// orderedLane is one lane the load publishes to.
type orderedLane struct {
	kind, endpointID string
	keys             []string // ordering keys sent in turn (one for a per-key lane)
	every            time.Duration
}

// name identifies the lane in the ledger: endpoint and key, or the
// endpoint alone when it is ordered per endpoint.
func (l orderedLane) name() string {
	if l.kind == kindOrderedEndpoint {
		return l.endpointID
	}
	return l.endpointID + "/" + l.keys[0]
}

// orderedLanes lists the lanes of the endpoints createEndpoints made.
func (p *publisher) orderedLanes() []orderedLane {
	var ls []orderedLane
	for _, ep := range p.endpoints[kindOrderedKey] {
		for k := range orderedKeys {
			ls = append(ls, orderedLane{kind: kindOrderedKey, endpointID: ep, keys: []string{fmt.Sprintf("key-%02d", k)}, every: orderedKeyEvery})
		}
	}
	for _, ep := range p.endpoints[kindOrderedEndpoint] {
		ls = append(ls, orderedLane{kind: kindOrderedEndpoint, endpointID: ep, keys: []string{"a", "b", "c"}, every: orderedEndpointEvery})
	}
	return ls
}

// runOrdered publishes every lane until ctx ends, each from its own
// goroutine (started at a random point of its period, so the lanes do not
// publish in step), and waits for the publishes it started.
func (p *publisher) runOrdered(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, l := range p.orderedLanes() {
		wg.Go(func() {
			t := time.NewTimer(rand.N(l.every))
			defer t.Stop()
			for i := 0; ; {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				t.Reset(l.every)
				for range orderedBurst {
					seq := p.seq.Add(1) - 1
					p.publishTo(context.WithoutCancel(ctx), seq, l.kind, l.endpointID, l.keys[i%len(l.keys)], l.name(), i)
					i++
				}
			}
		})
	}
}

// orderViolations checks every ordered lane of acc against what the
// receivers saw: each member's first 2xx-answered request must have
// arrived after the first 2xx answer of every member published before
// it (repeats are allowed; members that never got a 2xx, dead-lettered
// by skip, are not compared). It returns what it checked and what it
// found.
func orderViolations(acc []accepted, got map[string]seen) (c orderCheck) {
	byLane := map[string][]accepted{}
	for _, a := range acc {
		if a.lane != "" {
			byLane[a.lane] = append(byLane[a.lane], a)
		}
	}
	for name, ms := range byLane {
		c.lanes++
		c.members += len(ms)
		slices.SortFunc(ms, func(a, b accepted) int { return a.laneSeq - b.laneSeq })
		var prev accepted // the earlier member whose first 2xx answer was latest
		var latest time.Time
		for _, m := range ms {
			s := got[m.eventID]
			if s.ok > 1 {
				c.repeated++
			}
			if s.first.IsZero() {
				continue
			}
			if !latest.IsZero() && s.firstStart.Before(latest) {
				c.violations++
				if len(c.examples) < 5 {
					c.examples = append(c.examples, fmt.Sprintf("lane %s: member %d (%s) first succeeded %v before member %d (%s) had its first success answered",
						name, m.laneSeq, m.deliveryID, latest.Sub(s.firstStart), prev.laneSeq, prev.deliveryID))
				}
			}
			if s.first.After(latest) {
				latest, prev = s.first, m
			}
		}
	}
	return c
}

// orderCheck is what orderViolations checked and found: lanes and
// their members (deliveries), members answered 2xx more than once (a
// repeat, allowed), members whose first success came out of order.
type orderCheck struct {
	lanes, members, repeated, violations int
	examples                             []string
}
