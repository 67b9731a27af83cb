package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hookline/hookline/bench/harness"
)

// session is one scenario's Hookline with the harness's clients of it.
type session struct {
	st    *stack
	h     *hookline
	kafka *kafkaStats
	rcv   *receiver
}

// withSession starts a fresh Hookline and a receiver, proves the pipeline
// delivers one event end to end (so a measuring window never includes
// start-up), runs fn, and stops everything. ctx given to fn is canceled
// if a Hookline process exits. It returns the processes' memory figures
// read just before they were stopped.
func withSession(ctx context.Context, b *bench, name string, fn func(ctx context.Context, s *session) error) ([]harness.MemFigures, error) {
	rcv, err := newReceiver()
	if err != nil {
		return nil, err
	}
	defer rcv.close()
	st, err := b.launch.start(ctx, name)
	if err != nil {
		return nil, err
	}
	closed := false
	defer func() {
		if !closed {
			st.close()
		}
	}()
	h, err := dialHookline(st.grpcAddr, st.apiKey, 4)
	if err != nil {
		return nil, err
	}
	defer h.close()
	ks, err := newKafkaStats(st.brokers, st.prefix)
	if err != nil {
		return nil, err
	}
	defer ks.close()
	s := &session{st: st, h: h, kafka: ks, rcv: rcv}
	ctx, cancel := harness.Exited(ctx, st.procs...)
	defer cancel()
	if err := s.canary(ctx, b.payload); err != nil {
		return nil, err
	}
	err = fn(ctx, s)
	if err != nil && context.Cause(ctx) != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (%w)", err, context.Cause(ctx))
	}
	cancel()
	mem := st.close()
	closed = true
	return mem, err
}

// canary creates an endpoint, publishes one event to it and waits up to
// 90 s for it to arrive: the dispatcher has joined its group and the
// whole path works.
func (s *session) canary(ctx context.Context, payload []byte) error {
	url := s.rcv.handle("/canary", route{group: "canary"})
	if _, err := s.h.createEndpoint(ctx, endpointSpec{url: url, eventTypes: []string{"bench.canary"}}); err != nil {
		return err
	}
	if _, _, err := s.h.publish(ctx, "bench.canary", payload); err != nil {
		return fmt.Errorf("publish canary: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := s.rcv.waitUnique(wctx, "canary", 1); err != nil {
		return fmt.Errorf("first delivery: %w", err)
	}
	return nil
}

// memoryLine formats memory figures: peak (VmHWM) per process.
func memoryLine(mem []harness.MemFigures) string {
	var parts []string
	for _, m := range mem {
		parts = append(parts, fmt.Sprintf("%s %s (peak %s)", shortName(m.Name), mib(m.Last), mib(m.HWM)))
	}
	return strings.Join(parts, " · ")
}

// shortName drops the scenario prefix of a process name ("lifted-dev" → "dev").
func shortName(n string) string {
	if i := strings.LastIndex(n, "-"); i >= 0 {
		return n[i+1:]
	}
	return n
}
