package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// heldPayloadBytes is the payload of the held scenario's events: large
// enough that a hold rewriting its payload at every recheck (F3) shows
// at once against one that writes a reference.
const heldPayloadBytes = 64 << 10

// runHeld pauses one endpoint, publishes cfg.Held events of 64 KiB to
// it, holds them for cfg.HoldFor (each parked once in the parked topic:
// no recheck; every topic with the prefix is counted, parked included),
// then resumes it and waits for every one to arrive. It reports what the
// hold wrote to Kafka beyond the originals: records and bytes per held
// delivery per minute of hold (a park is one record of a few hundred
// bytes, by reference; nothing is written while it waits).
func runHeld(ctx context.Context, b *bench) error {
	n := b.cfg.Held
	payload := []byte(`{"pad":"` + strings.Repeat("x", heldPayloadBytes-10) + `"}`)
	var perRecords, perBytes float64
	var originals, hold written
	var held time.Duration
	var drainTook time.Duration
	mem, err := withSession(ctx, b, "held", func(ctx context.Context, s *session) error {
		id, err := s.h.createEndpoint(ctx, endpointSpec{url: s.rcv.handle("/held", route{group: "held"}), eventTypes: []string{"bench.held"}})
		if err != nil {
			return err
		}
		if err := s.h.pause(ctx, id, true); err != nil {
			return err
		}
		w0, err := s.kafka.snapshot(ctx)
		if err != nil {
			return err
		}
		for i := range n {
			if _, _, err := s.h.publish(ctx, "bench.held", payload); err != nil {
				return fmt.Errorf("publish %d of %d to the paused endpoint: %w", i+1, n, err)
			}
		}
		w1, err := s.kafka.snapshot(ctx)
		if err != nil {
			return err
		}
		start := time.Now()
		select {
		case <-time.After(b.cfg.HoldFor):
		case <-ctx.Done():
			return ctx.Err()
		}
		w2, err := s.kafka.snapshot(ctx)
		if err != nil {
			return err
		}
		held = time.Since(start)
		if got := s.rcv.attempts("held"); got != 0 {
			return fmt.Errorf("the paused endpoint received %d requests while held", got)
		}
		originals, hold = w1.minus(w0), w2.minus(w1)
		minutes := held.Minutes()
		perRecords = float64(hold.records) / float64(n) / minutes
		perBytes = float64(hold.bytes) / float64(n) / minutes
		resumed := time.Now()
		if err := s.h.pause(ctx, id, false); err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, b.cfg.Drain)
		defer cancel()
		if err := s.rcv.waitUnique(wctx, "held", int64(n)); err != nil {
			return fmt.Errorf("after the resume: %w", err)
		}
		drainTook = s.rcv.lastArrival("held").Sub(resumed)
		return nil
	})
	if err != nil {
		return err
	}
	b.rep.add("held deliveries", fmt.Sprintf("%d × %d KiB to one paused endpoint, held %s (parked once each)", n, heldPayloadBytes>>10, held.Round(time.Second)),
		fmt.Sprintf("originals: %d records, %.1f MiB", originals.records, float64(originals.bytes)/(1<<20)))
	b.rep.add("Kafka written while held, per held delivery per minute", fmt.Sprintf("%.1f records · %.0f bytes (%s)", perRecords, perBytes, hold.perDelivery(int64(n), 4)),
		fmt.Sprintf("%.3f of its payload", perBytes/heldPayloadBytes))
	b.rep.add("after the resume", fmt.Sprintf("all %d delivered within %s", n, drainTook.Round(100*time.Millisecond)), "")
	b.rep.add("RSS at end (peak)", memoryLine(mem), "")
	return nil
}
