package main

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
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
	// lane is the ordered lane the delivery joined ("" for unordered
	// traffic) and laneSeq its place in the lane's publish order.
	lane    string
	laneSeq int
}

// publisher drives steady load through every ingest replica, retrying a
// failed publish with the same idempotency key (as the SDK does) until
// it is accepted or its budget is spent. Safe for concurrent use.
type publisher struct {
	conns     []*grpc.ClientConn
	events    []hooklinev1.EventServiceClient
	endpoints map[string][]string // kind -> endpoint ids (events spread over them)
	key, tag  string
	budget    time.Duration
	shape     loadShape
	pad       string // added to every payload

	mu          sync.Mutex
	accepted    []accepted
	unconfirmed map[int64]bool  // seq of publishes never answered OK
	rejected    map[string]int  // last gRPC code of publishes given up
	pushedBack  int             // RESOURCE_EXHAUSTED answers (each retried after its RetryInfo delay)
	latencies   []time.Duration // of every call answered OK
	seq         atomic.Int64
}

func newPublisher(st *stack, tag string, budget time.Duration, shape loadShape) (*publisher, error) {
	p := &publisher{key: st.apiKey, tag: tag, budget: budget, shape: shape, pad: strings.Repeat("p", shape.pad),
		endpoints: map[string][]string{}, unconfirmed: map[int64]bool{}, rejected: map[string]int{}}
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

// createEndpoints makes the endpoints of every receiver kind the mix
// uses: one each, shape.slowEndpoints for the slow receiver, one per
// misbehaving receiver. Failing receivers get a short ladder and opt out
// of outage mode, so every delivery to them ends (FAILED or EXPIRED)
// within seconds instead of being held for days.
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
	var reqs []*hooklinev1.CreateEndpointRequest
	kindOfReq := map[*hooklinev1.CreateEndpointRequest]string{}
	for _, k := range kinds {
		n := 1
		switch k {
		case kindSlow:
			n = max(p.shape.slowEndpoints, 1)
		case kindOrderedKey:
			n = orderedKeyEndpoints
		}
		for i := range n {
			req := &hooklinev1.CreateEndpointRequest{Url: fmt.Sprintf("%s/%d", rx.urls[k], i), Description: "chaos " + k}
			switch k {
			case kindSlow:
				req.MaxInFlight = p.shape.slowInFlight
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
			case kindOrderedKey, kindOrderedEndpoint:
				// A head that fails 12 times is skipped (dead-lettered),
				// so no lane holds past the settle wait.
				req.RetryPolicy = short(12, time.Second)
				req.OutageModeDisabled = true
				req.Ordering = hooklinev1.Ordering_ORDERING_PER_KEY
				if k == kindOrderedEndpoint {
					req.Ordering = hooklinev1.Ordering_ORDERING_PER_ENDPOINT
				}
				// The second per-key endpoint blocks its lanes on a head
				// that fails for good instead of skipping it: its heads'
				// retries hold their followers the block way (a head
				// failing 12 times in a row at one 503 in four, about one
				// in 17 million, would hold its lane for an operator and
				// show as unfinished).
				if k == kindOrderedKey && i == 1 {
					req.OnHeadFailure = hooklinev1.HeadFailure_HEAD_FAILURE_BLOCK
				}
			}
			reqs = append(reqs, req)
			kindOfReq[req] = k
		}
	}
	for _, name := range slices.Sorted(maps.Keys(rx.bad)) {
		req := &hooklinev1.CreateEndpointRequest{Url: rx.bad[name], Description: "chaos misbehaving " + name,
			RetryPolicy: short(2, time.Second), OutageModeDisabled: true, Timeout: durationpb.New(time.Second)}
		reqs = append(reqs, req)
		kindOfReq[req] = kindBad
	}
	for _, req := range reqs {
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
			return fmt.Errorf("create %s endpoint: %w", req.GetDescription(), err)
		}
		k := kindOfReq[req]
		p.endpoints[k] = append(p.endpoints[k], resp.GetEndpoint().GetId())
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

// run publishes rate events per second (0: as fast as the publishes in
// flight are answered) until ctx ends or max events (0: no limit) were
// published, at most inflight publishes at once (a stalled Hookline
// slows the load, as it would slow a real producer), and waits for the
// publishes it started.
func (p *publisher) run(ctx context.Context, rate, inflight, maxEvents int) {
	sem := make(chan struct{}, inflight)
	var wg sync.WaitGroup
	defer wg.Wait()
	var tick <-chan time.Time
	if rate > 0 {
		t := time.NewTicker(time.Second / time.Duration(rate))
		defer t.Stop()
		tick = t.C
	}
	for maxEvents <= 0 || p.seq.Load() < int64(maxEvents) {
		if tick != nil {
			select {
			case <-ctx.Done():
				return
			case <-tick:
			}
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		seq := p.seq.Add(1) - 1
		wg.Go(func() {
			defer func() { <-sem }()
			p.publish(context.WithoutCancel(ctx), seq)
		})
	}
}

// publish sends event seq of the unordered mix.
func (p *publisher) publish(ctx context.Context, seq int64) {
	kind := p.shape.mix(seq)
	eps := p.endpoints[kind]
	p.publishTo(ctx, seq, kind, eps[int(seq)%len(eps)], "", "", 0)
}

// publishTo sends event seq to one endpoint of kind, with ordering key
// key (in ordered lane lane at laneSeq when lane is not ""), retrying transient failures with the same
// idempotency key, across replicas, within the budget, and reports
// whether it was accepted.
func (p *publisher) publishTo(ctx context.Context, seq int64, kind, endpointID, key, lane string, laneSeq int) bool {
	req := &hooklinev1.PublishEventRequest{
		EventType:      "chaos.test",
		Payload:        fmt.Appendf(nil, `{"seq":%d,"kind":%q,"pad":%q}`, seq, kind, p.pad),
		IdempotencyKey: fmt.Sprintf("%s-%d", p.tag, seq),
		EndpointIds:    []string{endpointID},
		OrderingKey:    key,
	}
	deadline := time.Now().Add(p.budget)
	var last error
	for try := 0; time.Now().Before(deadline); try++ {
		cctx, cancel := context.WithTimeout(p.auth(ctx), 12*time.Second)
		start := time.Now()
		resp, err := p.events[(int(seq)+try)%len(p.events)].PublishEvent(cctx, req)
		cancel()
		if err == nil {
			now := time.Now()
			p.mu.Lock()
			p.latencies = append(p.latencies, now.Sub(start))
			for _, d := range resp.GetDeliveries() {
				p.accepted = append(p.accepted, accepted{deliveryID: d.GetDeliveryId(), eventID: resp.GetEventId(), kind: kind, seq: seq, at: now,
					lane: lane, laneSeq: laneSeq})
			}
			p.mu.Unlock()
			return true
		}
		last = err
		switch status.Code(err) {
		case codes.InvalidArgument, codes.PermissionDenied, codes.Unauthenticated, codes.NotFound:
			deadline = time.Time{} // a client bug, not an outage: do not retry
		}
		if !time.Now().Before(deadline) {
			break
		}
		if d, ok := retryDelay(err); ok {
			// Pushed back: wait what ingest asked, plus jitter, and try
			// again without counting it as a failure.
			p.mu.Lock()
			p.pushedBack++
			p.mu.Unlock()
			time.Sleep(min(d+rand.N(d), time.Until(deadline)))
			try--
			continue
		}
		// Back off before the next try: full jitter is the SDK's job; a
		// fixed doubling is enough for a harness with one client.
		time.Sleep(min(time.Duration(1<<min(try, 4))*100*time.Millisecond, time.Until(deadline)))
	}
	p.mu.Lock()
	p.unconfirmed[seq] = true
	p.rejected[status.Code(last).String()]++
	p.mu.Unlock()
	return false
}

// retryDelay is the RetryInfo delay of a RESOURCE_EXHAUSTED answer.
func retryDelay(err error) (time.Duration, bool) {
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		return 0, false
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay().AsDuration() > 0 {
			return ri.GetRetryDelay().AsDuration(), true
		}
	}
	return 0, false
}

// pressure is how often publishes were pushed back and the 99th
// percentile of the calls answered OK.
func (p *publisher) pressure() (pushedBack int, p99 time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pushedBack, percentile(p.latencies, 0.99)
}

// percentile returns the q-quantile of ds (0 when empty); ds is sorted.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(int(float64(len(ds))*q), len(ds)-1)]
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
