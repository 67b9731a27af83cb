package main

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// The isolation scenario offers a fixed 600 events/s, far below what 60
// healthy endpoints take; a receiver that slows down hurts its
// neighbours most when the machine is saturated (issue 26 item 4). So
// this one offers the healthy endpoints what they reach alone: three
// sessions, one after another, on the same 60 healthy endpoints with
// limits lifted —
//  1. alone, as fast as Hookline delivers (closed loop, at most
//     cfg.PublishCap deliveries ahead of the receiver): their rate R;
//  2. alone, paced at R: the baseline throughput and latency;
//  3. paced at R beside 30 endpoints that answer 2xx after 9 s (attempt
//     timeout 10 s, so nothing counts them failing) and 10 that hang to
//     their 10 s timeout, each sick endpoint offered 10 events/s with
//     default limits;
// and compares 3 with 2.

const (
	satHealthy   = 60
	satSlow      = 30
	satHang      = 10
	satSickRate  = 10 // events/s offered to each sick endpoint
	satSlowDelay = 9 * time.Second
	satTimeout   = 10 * time.Second
)

func runIsolationSaturated(ctx context.Context, b *bench) error {
	top, err := satRun(ctx, b, "sat-max", 0, false)
	if err != nil {
		return fmt.Errorf("healthy alone, as fast as they go: %w", err)
	}
	if top.rate <= 0 {
		return fmt.Errorf("healthy alone, as fast as they go: nothing delivered in the window")
	}
	base, err := satRun(ctx, b, "sat-alone", top.rate, false)
	if err != nil {
		return fmt.Errorf("healthy alone at %.0f/s: %w", top.rate, err)
	}
	sick, err := satRun(ctx, b, "sat-sick", top.rate, true)
	if err != nil {
		return fmt.Errorf("healthy at %.0f/s beside sick endpoints: %w", top.rate, err)
	}
	b.rep.add("healthy alone, as fast as they go", fmt.Sprintf("%.0f/s", top.rate), "")
	b.rep.add("healthy alone at that rate: deliveries/s · latency", fmt.Sprintf("%.0f/s · %s", base.rate, base.q), "")
	b.rep.add("healthy beside sick at that rate: deliveries/s · latency", fmt.Sprintf("%.0f/s · %s", sick.rate, sick.q), "")
	b.rep.add("healthy throughput beside sick / alone (at saturation)", "", pct(sick.rate, base.rate)+" (target ≥ 90%)")
	p99Ratio := "n/a"
	if base.q.p99 > 0 {
		p99Ratio = fmt.Sprintf("%.1f×", float64(sick.q.p99)/float64(base.q.p99))
	}
	b.rep.add("healthy p99 beside sick / alone (at saturation)", "", p99Ratio+" (target ≤ 2×)")
	b.rep.add("dispatcher window, healthy alone at that rate", base.window.String(), "")
	b.rep.add("dispatcher window, beside sick", sick.window.String(), "")
	for _, r := range []isoResult{top, base, sick} {
		if r.profiled != "" {
			b.rep.add("profiles", r.profiled, "")
		}
	}
	b.rep.add("sick endpoints", fmt.Sprintf("offered %d events/s each; slow answered %d; hanging saw %d attempts; healthy not delivered within the drain bound: %d alone, %d beside",
		satSickRate, sick.slowOK, sick.hangs, base.missing, sick.missing), "")
	return nil
}

// satRun is one session: the healthy endpoints offered rate events/s
// in all (0: as fast as they are delivered), with or without the sick
// ones.
func satRun(ctx context.Context, b *bench, name string, rate float64, withSick bool) (isoResult, error) {
	var res isoResult
	_, err := withSession(ctx, b, name, func(ctx context.Context, s *session) error {
		var specs []endpointSpec
		for i := range satHealthy {
			specs = append(specs, endpointSpec{
				url:         s.rcv.handle(fmt.Sprintf("/sat/h%d", i), route{group: "healthy"}),
				eventTypes:  []string{fmt.Sprintf("bench.sat.h%d", i)},
				maxInFlight: 64, rate: 100000,
			})
		}
		if withSick {
			for i := range satSlow {
				specs = append(specs, endpointSpec{
					url:        s.rcv.handle(fmt.Sprintf("/sat/s%d", i), route{group: "slow", kind: answerSlow, delay: satSlowDelay}),
					eventTypes: []string{fmt.Sprintf("bench.sat.s%d", i)},
					timeout:    satTimeout,
				})
			}
			for i := range satHang {
				specs = append(specs, endpointSpec{
					url:        s.rcv.handle(fmt.Sprintf("/sat/x%d", i), route{group: "hang", kind: answerHang}),
					eventTypes: []string{fmt.Sprintf("bench.sat.x%d", i)},
					timeout:    satTimeout,
				})
			}
		}
		if _, err := s.h.createEndpoints(ctx, specs); err != nil {
			return err
		}
		log := newPublishLog()
		start := time.Now()
		from, to := start.Add(b.cfg.Warmup), start.Add(b.cfg.Warmup+b.cfg.Window)
		prof := startProfiles(ctx, b.cfg, name, from, b.cfg.Window)
		win := sampleWindow(ctx, s.st.metricsAddr, from, to)
		healthy := func(ctx context.Context, i int, due time.Time) {
			id, _, err := s.h.publish(ctx, fmt.Sprintf("bench.sat.h%d", i%satHealthy), b.payload)
			if err != nil {
				log.errs.Add(1)
				return
			}
			log.add(id, due)
		}
		var wg sync.WaitGroup
		if withSick {
			wg.Go(func() {
				sick := satSlow + satHang
				paced(ctx, float64(sick*satSickRate), b.cfg.Warmup+b.cfg.Window, 1<<40, 1024, func(ctx context.Context, i int, _ time.Time) {
					typ := fmt.Sprintf("bench.sat.s%d", i%sick)
					if i%sick >= satSlow {
						typ = fmt.Sprintf("bench.sat.x%d", i%sick-satSlow)
					}
					if _, _, err := s.h.publish(ctx, typ, b.payload); err != nil {
						log.errs.Add(1)
					}
				})
			})
		}
		if rate > 0 {
			paced(ctx, rate, b.cfg.Warmup+b.cfg.Window, 1<<40, 1024, healthy)
		} else {
			cr := newCredits(b.cfg.PublishCap)
			s.rcv.notify(func(g string) {
				if g == "healthy" {
					cr.give()
				}
			})
			closedLoop(ctx, b.cfg.Publishers, 1<<40, to, func(ctx context.Context, i int) {
				if cr.take(ctx, 1) != nil {
					return
				}
				healthy(ctx, i, time.Now())
			})
		}
		wg.Wait()
		profiled := prof()
		window := win()
		var err error
		res, err = isoMeasure(ctx, b, s, log, from, to)
		res.profiled, res.window = profiled, window
		return err
	})
	return res, err
}
