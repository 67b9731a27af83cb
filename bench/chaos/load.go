package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// accepted is one delivery a PublishEvent answered OK for.
type accepted struct {
	deliveryID, eventID, kind string
	seq                       int64
	at                        time.Time // when the publish was answered
}

// publisher drives steady load through every ingest replica, retrying a
// failed publish with the same idempotency key (as the SDK does) until
// it is accepted or its budget is spent. Safe for concurrent use.
type publisher struct {
	conns     []*grpc.ClientConn
	events    []hooklinev1.EventServiceClient
	endpoints map[string]string // kind -> endpoint id
	key, tag  string
	budget    time.Duration

	mu          sync.Mutex
	accepted    []accepted
	unconfirmed map[int64]bool // seq of publishes never answered OK
	rejected    map[string]int // last gRPC code of publishes given up
	seq         atomic.Int64
}

func newPublisher(st *stack, tag string, budget time.Duration) (*publisher, error) {
	p := &publisher{key: st.apiKey, tag: tag, budget: budget, endpoints: map[string]string{}, unconfirmed: map[int64]bool{}, rejected: map[string]int{}}
	for _, addr := range st.ingest {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			p.close()
			return nil, err
		}
		p.conns = append(p.conns, c)
		p.events = append(p.events, hooklinev1.NewEventServiceClient(c))
	}
	return p, nil
}

func (p *publisher) close() {
	for _, c := range p.conns {
		_ = c.Close()
	}
}

func (p *publisher) auth(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+p.key)
}

// createEndpoints makes one endpoint per receiver kind. Failing receivers
// get a short ladder and opt out of outage mode, so every delivery to them
// ends (FAILED or EXPIRED) within seconds instead of being held for days.
func (p *publisher) createEndpoints(ctx context.Context, rx *receivers) error {
	c := hooklinev1.NewEndpointServiceClient(p.conns[0])
	short := func(attempts uint32, delays ...time.Duration) *hooklinev1.RetryPolicy {
		var ds []*durationpb.Duration
		for _, d := range delays {
			ds = append(ds, durationpb.New(d))
		}
		return &hooklinev1.RetryPolicy{
			Schedule:    &hooklinev1.RetryPolicy_Ladder{Ladder: &hooklinev1.RetryPolicy_DelayLadder{Delays: ds}},
			Jitter:      hooklinev1.RetryPolicy_JITTER_NONE,
			MaxAttempts: attempts,
			MaxAge:      durationpb.New(5 * time.Minute),
		}
	}
	for _, k := range kinds {
		req := &hooklinev1.CreateEndpointRequest{Url: rx.urls[k], Description: "chaos " + k}
		switch k {
		case kindFlaky:
			req.RetryPolicy = short(12, time.Second)
			req.OutageModeDisabled = true
		case kindDead:
			req.RetryPolicy = short(3, time.Second, 2*time.Second)
			req.OutageModeDisabled = true
		case kindHanging:
			req.RetryPolicy = short(2, time.Second)
			req.OutageModeDisabled = true
			req.Timeout = durationpb.New(time.Second)
		}
		var resp *hooklinev1.CreateEndpointResponse
		var err error
		for try := range 10 {
			cctx, cancel := context.WithTimeout(p.auth(ctx), 15*time.Second)
			resp, err = c.CreateEndpoint(cctx, req)
			cancel()
			if err == nil || status.Code(err) == codes.InvalidArgument {
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(try+1) * 200 * time.Millisecond):
			}
		}
		if err != nil {
			return fmt.Errorf("create %s endpoint: %w", k, err)
		}
		p.endpoints[k] = resp.GetEndpoint().GetId()
	}
	return nil
}

// kindOf is the load mix: half healthy, a fifth slow, 15% flaky, 10% dead,
// 5% hanging.
func kindOf(seq int64) string {
	switch n := seq % 20; {
	case n < 10:
		return kindHealthy
	case n < 14:
		return kindSlow
	case n < 17:
		return kindFlaky
	case n < 19:
		return kindDead
	}
	return kindHanging
}

// run publishes rate events per second until ctx ends, at most inflight
// publishes at once (a stalled Hookline slows the load, as it would slow
// a real producer), and waits for the publishes it started.
func (p *publisher) run(ctx context.Context, rate, inflight int) {
	sem := make(chan struct{}, inflight)
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-tick.C:
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return
		}
		seq := p.seq.Add(1) - 1
		wg.Go(func() {
			defer func() { <-sem }()
			p.publish(context.WithoutCancel(ctx), seq)
		})
	}
}

// publish sends event seq, retrying transient failures with the same
// idempotency key, across replicas, within the budget.
func (p *publisher) publish(ctx context.Context, seq int64) {
	kind := kindOf(seq)
	req := &hooklinev1.PublishEventRequest{
		EventType:      "chaos.test",
		Payload:        fmt.Appendf(nil, `{"seq":%d,"kind":%q}`, seq, kind),
		IdempotencyKey: fmt.Sprintf("%s-%d", p.tag, seq),
		EndpointIds:    []string{p.endpoints[kind]},
	}
	deadline := time.Now().Add(p.budget)
	var last error
	for try := 0; time.Now().Before(deadline); try++ {
		cctx, cancel := context.WithTimeout(p.auth(ctx), 12*time.Second)
		resp, err := p.events[(int(seq)+try)%len(p.events)].PublishEvent(cctx, req)
		cancel()
		if err == nil {
			now := time.Now()
			p.mu.Lock()
			for _, d := range resp.GetDeliveries() {
				p.accepted = append(p.accepted, accepted{deliveryID: d.GetDeliveryId(), eventID: resp.GetEventId(), kind: kind, seq: seq, at: now})
			}
			p.mu.Unlock()
			return
		}
		last = err
		switch status.Code(err) {
		case codes.InvalidArgument, codes.PermissionDenied, codes.Unauthenticated, codes.NotFound:
			deadline = time.Time{} // a client bug, not an outage: do not retry
		}
		if !time.Now().Before(deadline) {
			break
		}
		// Back off before the next try: full jitter is the SDK's job; a
		// fixed doubling is enough for a harness with one client.
		time.Sleep(min(time.Duration(1<<min(try, 4))*100*time.Millisecond, time.Until(deadline)))
	}
	p.mu.Lock()
	p.unconfirmed[seq] = true
	p.rejected[status.Code(last).String()]++
	p.mu.Unlock()
}

// snapshot copies the accepted deliveries so far.
func (p *publisher) snapshot() ([]accepted, map[int64]bool, map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	u := make(map[int64]bool, len(p.unconfirmed))
	for k, v := range p.unconfirmed {
		u[k] = v
	}
	r := make(map[string]int, len(p.rejected))
	for k, v := range p.rejected {
		r[k] = v
	}
	return append([]accepted(nil), p.accepted...), u, r
}
