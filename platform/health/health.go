// Package health is the one home of the HTTP liveness and readiness
// endpoints of Hookline's Kafka consumers (the dispatcher and the
// scheduler; ingest answers the gRPC health protocol instead):
//
//	GET /healthz  200 while the process runs and its service has not failed
//	GET /readyz   200 once the service is ready (see Probe), 503 otherwise
//
// Both answer a one-line plain-text reason. --health-addr (env
// HOOKLINE_HEALTH_ADDR) turns the endpoint on; Kubernetes probes use it
// (deploy/helm/hookline).
package health

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Config is the health section of a consumer service's configuration.
type Config struct {
	Addr string `flag:"health-addr" env:"HOOKLINE_HEALTH_ADDR" usage:"listen address of the HTTP health endpoint (/healthz liveness, /readyz readiness), e.g. :8086 (default: no endpoint)"`
}

// Probe is a consumer's readiness, fed by its consume loop. The service
// is ready when all of these hold:
//
//  1. it has started: its topics exist and the views it reads before
//     consuming are loaded (Started);
//  2. it is a member of its consumer group and holds its current
//     assignment: the latest OnPartitionsAssigned callback has returned
//     (Assigned) and no OnPartitionsLost came after it (Lost). An empty
//     assignment counts: with more replicas than partitions a member may
//     rightly hold none;
//  3. it is caught up with that assignment, either way:
//     a. a poll that began after the assignment callback returned has
//     come back (PollBegins, PollEnded): the group's committed offsets
//     of every assigned partition were loaded, fetching from them started
//     and records arrived (or the loop's own timer ended the poll);
//     b. or, read through kadm (CheckLag), on every partition the member
//     holds the group's committed offset is at most ReadyLag records
//     short of the log end offset. This covers an idle topic, where a
//     poll waits until data arrives. Transaction markers count as
//     records in this difference, hence a bound above zero;
//     and, with kadm (CheckLag), the rebalance is over: the group is
//     Stable, and a member that holds no partition is in a group with
//     more members than the partitions of its topics. (A cooperative
//     rebalance first hands a joining member nothing while the others
//     give partitions up, then a second round hands them over: the empty
//     first assignment is not taken for the final one.)
//  4. it is not draining (Draining, on SIGTERM) and has not failed.
//
// A new assignment (every rebalance) clears 3 until the next poll comes
// back, which is milliseconds for a running member. Once caught up, a
// member stays so until its next assignment. Safe for concurrent use;
// the zero value is not ready.
type Probe struct {
	mu       sync.Mutex
	started  bool
	assigned bool
	epoch    uint64 // assignments so far
	polled   uint64 // the epoch a poll came back in, begun after it
	caughtUp uint64 // the epoch found caught up (3)
	parts    map[string]map[int32]bool
	draining bool
	failed   error
	adm      *kadm.Client
	group    string
	topics   []string
}

// ReadyLag is the committed lag, in records, under which every held
// partition counts as caught up (3b).
const ReadyLag = 100

// CheckLag lets readiness read group's state and committed lag through
// adm (3); topics are the topics the group consumes.
func (p *Probe) CheckLag(adm *kadm.Client, group string, topics ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.adm, p.group, p.topics = adm, group, topics
}

// Started marks the service started (step 1).
func (p *Probe) Started() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.started = true
}

// Assigned records that an OnPartitionsAssigned callback returned with
// the partitions m newly assigned (all of them after an eager rebalance,
// the added ones after a cooperative one; possibly none).
func (p *Probe) Assigned(m map[string][]int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.assigned = true
	p.epoch++
	if p.parts == nil {
		p.parts = map[string]map[int32]bool{}
	}
	for t, ps := range m {
		if p.parts[t] == nil {
			p.parts[t] = map[int32]bool{}
		}
		for _, q := range ps {
			p.parts[t][q] = true
		}
	}
}

// Revoked records that the partitions m were revoked in a rebalance; the
// member stays in the group (readiness waits for the Assigned that ends
// the rebalance).
func (p *Probe) Revoked(m map[string][]int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for t, ps := range m {
		for _, q := range ps {
			delete(p.parts[t], q)
		}
	}
}

// Lost records that the member lost its partitions (session expired,
// fenced): not ready until the next assignment and poll.
func (p *Probe) Lost() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.assigned = false
	p.epoch++
	p.parts = nil
}

// PollBegins is called before each poll; the returned token goes to
// PollEnded when the poll comes back.
func (p *Probe) PollBegins() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.assigned {
		return 0
	}
	return p.epoch
}

// PollEnded records that a poll begun with token came back.
func (p *Probe) PollEnded(token uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if token != 0 && token == p.epoch && p.assigned {
		p.polled = token
	}
}

// Draining marks the service shutting down: never ready again.
func (p *Probe) Draining() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.draining = true
}

// Failed marks the service failed: neither live nor ready.
func (p *Probe) Failed(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failed == nil {
		p.failed = err
	}
}

// Ready reports whether the service is ready and, either way, why. It
// may read the group's lag from Kafka (bounded by ctx).
func (p *Probe) Ready(ctx context.Context) (bool, string) {
	p.mu.Lock()
	switch {
	case p.failed != nil:
		p.mu.Unlock()
		return false, "failed: " + p.failed.Error()
	case p.draining:
		p.mu.Unlock()
		return false, "draining"
	case !p.started:
		p.mu.Unlock()
		return false, "starting: topics and views not loaded yet"
	case !p.assigned:
		p.mu.Unlock()
		return false, "not a member of the consumer group yet (no partition assignment)"
	}
	epoch, polled, n := p.epoch, p.polled == p.epoch, 0
	held := map[string][]int32{}
	for t, ps := range p.parts {
		for q := range ps {
			held[t] = append(held[t], q)
			n++
		}
	}
	adm, group, topics := p.adm, p.group, p.topics
	if p.caughtUp == epoch {
		p.mu.Unlock()
		return true, fmt.Sprintf("ready: %d partition(s) assigned", n)
	}
	p.mu.Unlock()
	how := "first poll of the assignment back"
	switch {
	case adm == nil && !polled:
		return false, "assigned; first poll of the assignment not back yet"
	case adm != nil:
		if why := unsettled(ctx, adm, group, topics, n); why != "" {
			return false, "assigned; " + why
		}
		if !polled {
			if why := lagAbove(ctx, adm, group, held); why != "" {
				return false, "assigned; first poll of the assignment not back yet and " + why
			}
			how = fmt.Sprintf("committed lag at most %d on each", ReadyLag)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.epoch != epoch || !p.assigned {
		return false, "assignment changed while checking"
	}
	p.caughtUp = epoch // stays caught up until the next assignment
	return true, fmt.Sprintf("ready: %d partition(s) assigned, %s", n, how)
}

// unsettled returns why group's rebalance is not known to be over for a
// member holding n partitions, or "" when it is (3).
func unsettled(ctx context.Context, adm *kadm.Client, group string, topics []string, n int) string {
	gs, err := adm.DescribeGroups(ctx, group)
	if err == nil {
		err = gs.Error()
	}
	if err != nil {
		return "group state unknown: " + err.Error()
	}
	g := gs[group]
	if g.State != "Stable" {
		return fmt.Sprintf("group %s is %s, not Stable (a rebalance is under way)", group, g.State)
	}
	if n > 0 {
		return ""
	}
	td, err := adm.ListTopics(ctx, topics...)
	if err == nil {
		err = td.Error()
	}
	if err != nil {
		return "partition count unknown: " + err.Error()
	}
	parts := 0
	for _, t := range td {
		parts += len(t.Partitions)
	}
	if len(g.Members) <= parts {
		return fmt.Sprintf("holds no partition while the group's %d members share %d partitions: a rebalance is still moving partitions here", len(g.Members), parts)
	}
	return ""
}

// lagAbove returns why the group's committed lag on the held partitions
// is not known to be within ReadyLag, or "" when it is.
func lagAbove(ctx context.Context, adm *kadm.Client, group string, held map[string][]int32) string {
	if len(held) == 0 {
		return ""
	}
	lags, err := adm.Lag(ctx, group)
	if err == nil {
		err = lags.Error()
	}
	if err != nil {
		return "lag unknown: " + err.Error()
	}
	gl := lags[group].Lag
	for t, ps := range held {
		for _, q := range ps {
			l, ok := gl.Lookup(t, q)
			switch {
			case !ok:
				return fmt.Sprintf("lag of %s/%d unknown", t, q)
			case l.Err != nil:
				return fmt.Sprintf("lag of %s/%d unknown: %v", t, q, l.Err)
			case l.Lag > ReadyLag:
				return fmt.Sprintf("%s/%d is %d records behind", t, q, l.Lag)
			}
		}
	}
	return ""
}

// Live reports whether the service is alive and, either way, why.
func (p *Probe) Live() (bool, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failed != nil {
		return false, "failed: " + p.failed.Error()
	}
	return true, "alive"
}

// Handler serves /healthz and /readyz from p.
func Handler(p *Probe) http.Handler {
	mux := http.NewServeMux()
	answer := func(f func(context.Context) (bool, string)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
			defer cancel()
			ok, why := f(ctx)
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("Cache-Control", "no-store")
			if !ok {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
			fmt.Fprintln(w, why)
		}
	}
	mux.HandleFunc("GET /healthz", answer(func(context.Context) (bool, string) { return p.Live() }))
	mux.HandleFunc("GET /readyz", answer(p.Ready))
	return mux
}

// Server is a running health endpoint.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// Serve listens on addr (bind errors are returned at once) and serves
// Handler(p) until Close. It outlives the service's context on purpose:
// while the service drains after SIGTERM, /readyz answers 503
// "draining" and /healthz 200.
func Serve(addr string, p *Probe) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--health-addr: %w", err)
	}
	s := &Server{
		srv:  &http.Server{Handler: Handler(p), ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second},
		ln:   ln,
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.Failed(fmt.Errorf("health endpoint: %w", err))
		}
	}()
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server within 2 s.
func (s *Server) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
	<-s.done
}

// Run is the part of a service's Run that serves health: with addr set it
// serves p on addr; /readyz answers 503 "draining" from the moment ctx
// ends. The returned end must be deferred with the Run's error: it
// marks a failed run on p, stops watching ctx and closes the server.
func Run(ctx context.Context, addr string, p *Probe) (end func(err error), err error) {
	var srv *Server
	if addr != "" {
		if srv, err = Serve(addr, p); err != nil {
			return nil, err
		}
	}
	stopDrain := context.AfterFunc(ctx, p.Draining)
	return func(err error) {
		if err != nil {
			p.Failed(err)
		}
		stopDrain()
		if srv != nil {
			srv.Close()
		}
	}, nil
}
